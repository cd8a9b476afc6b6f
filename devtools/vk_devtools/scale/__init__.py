"""The scale rig: many Offloads, a large GPU pool and many pods on one plane, and what each component
costs at rest and in a wave (bench/scale.py runs it at full size, tests/integration/test_scale.py small).
"""
