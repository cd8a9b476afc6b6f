"""An offline stand-in for RunPod's REST API v2 and its per-pod HTTP proxy, written from RunPod's
published OpenAPI document, so the runpod provider is tested against what RunPod would accept or refuse."""
