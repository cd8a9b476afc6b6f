"""Tests of the route table both data planes serve: its matching, building, signing scope, active
checks, feed and flags (`vk_provider.routetable`)."""
