"""`python -m vk_devtools.standins.runpod`: the stand-in as a process of its own (see `server`)."""

from vk_devtools.standins.runpod.server import main

if __name__ == "__main__":
    main()
