# tests/launcher: unit tests of the launcher's modules (launcher/*.py) with
# plain python3: no Sage, no podman, as root or as an unprivileged user.
#   python3 -m unittest discover -s tests/launcher -t . -q
