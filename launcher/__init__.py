# launcher: the program that runs inside every container, as the image's own
# Sage Python's first process (see main.py). Its modules have no side
# effects on import; bundle.py joins them into the one program sage-sandbox
# gives podman, and `python3 -m unittest discover -s tests/launcher -t .`
# tests them (make check-unit).
