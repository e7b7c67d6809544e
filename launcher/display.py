# launcher/display.py: what a call's code displays, as a notebook shows it:
# show() and .show() of graphics become images in SAGE_SANDBOX_OUT, named
# in order (show-1.png, ...), and, where the call asks for it, the value of
# its last expression is displayed too (child.run_code).
#
# Sage's rich output (sage.repl.rich_output) turns each displayed object
# into the best container the backend supports; this backend takes plain
# text (not the text art kinds: sage FILE's backend prints plain text),
# HTML (what show() makes of a formula) and PNG, SVG and GIF images. 3D
# graphics become a PNG rendered by tachyon (no scene viewer is
# supported); an animation a GIF, made by Pillow where the image has
# neither ImageMagick nor ffmpeg; a graphics array a PNG.
#
# Text goes to stdout exactly as before: its plain text, as `sage FILE`
# prints it. Images never go to stdout: with no files coming back (run
# without --output-dir), a line on stderr says once that one was shown and
# how to get it. Where the call asks for LaTeX (MCP), a formula's LaTeX is
# written beside the images as show-N.tex. Every file counts against the
# call's output-file limits, which the launcher applies when it sends them
# (outdir.py).
import os
import re
import sys

# Set per call by configure(); read by the backend.
_files_back = False
_latex = False
_noted = False
_first = 1

NO_FILES_NOTE = ("sage-sandbox: show() displayed an image, which is not kept: give the run an "
                 "output directory (run --output-dir DIR) to get it back as a file\n")

# What show() of a formula makes (BackendBase.latex_formatter): HTML
# around the LaTeX. Sage 9's is MathJax 2's script element, with Sage's
# \Bold macro first; Sage 10's is MathJax 3's delimiters in an html
# element, \(\displaystyle ...\) (or \[...\]), with each < written &lt;
# (sage.misc.html), which is HTML's, not the formula's.
_SCRIPT = re.compile(r'<script type="math/tex(?:; mode=display)?">(.*)</script>', re.S)
_DELIMITED = (re.compile(r'\A\s*<html>\s*\\\((?:\\displaystyle\b)?(.*)\\\)\s*</html>\s*\Z', re.S),
              re.compile(r'\A\s*<html>\s*\\\[(.*)\\\]\s*</html>\s*\Z', re.S))
_BOLD = "\\newcommand{\\Bold}[1]{\\mathbf{#1}}"


def formula_latex(html):
    """The LaTeX of a formula show() made into HTML, or None where the HTML
    is not one (Sage's html() of other things)."""
    found = _SCRIPT.search(html)
    if found:
        return found.group(1).replace(_BOLD, "", 1).strip()
    for form in _DELIMITED:
        found = form.search(html)
        if found:
            return found.group(1).replace("&lt;", "<").replace(_BOLD, "", 1).strip()
    return None


def configure(files_back, latex, first=1):
    """For the call about to run: whether its files come back, whether
    formulas are given as LaTeX too, and the number its first image gets
    (the host's directory may hold an earlier run's show-1.png)."""
    global _files_back, _latex, _noted, _first
    _files_back, _latex, _noted, _first = files_back, latex, False, first


def _next_name(directory, extension):
    """show-N.EXT, N from the call's first on, the first no show-N of any
    kind has (the code may have saved some): show-1.png, show-2.gif, ..."""
    taken = set()
    for name in os.listdir(directory):
        stem, dot, _ = name.partition(".")
        if dot and stem.startswith("show-") and stem[5:].isdigit():
            taken.add(int(stem[5:]))
    n = _first
    while n in taken:
        n += 1
    return "show-%d%s" % (n, extension)


def _keep(data, extension):
    global _noted
    directory = os.environ.get("SAGE_SANDBOX_OUT")
    if not _files_back or not directory:
        if not _noted:
            _noted = True
            sys.stderr.write(NO_FILES_NOTE)
            sys.stderr.flush()
        return
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, _next_name(directory, extension))
    # O_EXCL: a name the code took meanwhile is never written over.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _print_text(text):
    print(text)
    sys.stdout.flush()


def make_backend():
    from sage.repl.rich_output.backend_base import BackendBase
    from sage.repl.rich_output import output_catalog as catalog

    images = {catalog.OutputImagePng: ("png", ".png"), catalog.OutputImageSvg: ("svg", ".svg"),
              catalog.OutputImageGif: ("gif", ".gif")}
    # Text as sage FILE's simple backend gives it: plain, whatever the
    # display preferences ask (its ascii_art and unicode_art are a
    # notebook's; here they printed "atan(x)" drawn where Sage prints
    # "arctan(x)").
    texts = {catalog.OutputPlainText: "text"}

    class BackendSandbox(BackendBase):
        def _repr_(self):
            return "sage-sandbox"

        def supported_output(self):
            return set(images) | set(texts) | {catalog.OutputHtml}

        def displayhook(self, plain_text, rich_output):
            return self.display_immediately(plain_text, rich_output)

        def display_immediately(self, plain_text, rich_output):
            kind = type(rich_output)
            if kind in images:
                attribute, extension = images[kind]
                _keep(getattr(rich_output, attribute).get(), extension)
            elif kind in texts:
                _print_text(getattr(rich_output, texts[kind]).get_str())
            else:
                # HTML: what show() makes of a formula. Its plain text, as
                # ever; its LaTeX beside the images where the call wants it.
                _print_text(plain_text.text.get_str())
                formula = _latex and formula_latex(rich_output.html.get_str())
                if formula:
                    _keep(formula.encode(), ".tex")

    return BackendSandbox()


def _gif_with_pillow(animation, savefile, delay=20, iterations=0):
    """An animation as a GIF from its frames, by Pillow: the images Sage
    runs from have neither ImageMagick nor ffmpeg."""
    import glob
    import PIL.Image
    frames = [PIL.Image.open(f) for f in sorted(glob.glob(os.path.join(animation.png(), "*.png")))]
    if not frames:
        raise ValueError("the animation has no frames")
    frames[0].save(savefile, save_all=True, append_images=frames[1:], duration=int(delay) * 10,
                   loop=int(iterations), disposal=2)


def _patch_animation_gif():
    from sage.plot.animate import Animation
    original = Animation.gif

    def gif(self, delay=20, savefile=None, iterations=0, show_path=False, use_ffmpeg=False):
        try:
            return original(self, delay=delay, savefile=savefile, iterations=iterations,
                            show_path=show_path, use_ffmpeg=use_ffmpeg)
        except OSError as e:
            if "Neither ImageMagick nor ffmpeg" not in str(e) or savefile is None:
                raise
            _gif_with_pillow(self, savefile, delay, iterations)

    Animation.gif = gif


def install():
    """In the launcher, once Sage is imported: every call's process forks
    with this backend in place. Without Sage (the unit tests): nothing."""
    try:
        from sage.repl.rich_output import get_display_manager
    except ImportError:
        return
    get_display_manager().switch_backend(make_backend())
    try:
        _patch_animation_gif()
    except ImportError:
        pass


def show_last(value):
    """A cell's last expression, displayed as a notebook does: None shows
    nothing; text is Sage's own repr; graphics are images."""
    if value is None:
        return
    try:
        from sage.repl.rich_output import get_display_manager
    except ImportError:  # no Sage (the unit tests): Python's own display
        _print_text(repr(value))
        return
    get_display_manager().displayhook(value)
