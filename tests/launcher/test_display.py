# tests/launcher/test_display.py: the LaTeX of a formula that show() made
# into HTML (launcher/display.py), in each Sage's form, and none from HTML
# that holds no formula.
import unittest

from launcher import display

BOLD = "\\newcommand{\\Bold}[1]{\\mathbf{#1}}"


class FormulaLatexTest(unittest.TestCase):
    def test_sage_9_mathjax_2_script(self):
        html = '<html><script type="math/tex; mode=display">%s\\frac{1}{3} \\, x^{2}</script></html>' % BOLD
        self.assertEqual(display.formula_latex(html), "\\frac{1}{3} \\, x^{2}")
        self.assertEqual(display.formula_latex('<script type="math/tex">x</script>'), "x")

    def test_sage_10_displaystyle_inline_delimiters(self):
        html = "<html>\\(\\displaystyle \\frac{1}{3} \\, x^{2}\\)</html>"
        self.assertEqual(display.formula_latex(html), "\\frac{1}{3} \\, x^{2}")
        # No space after \displaystyle, and a \Bold macro first.
        self.assertEqual(display.formula_latex("<html>\\(\\displaystyle%s\\Bold{Z}\\)</html>\n" % BOLD),
                         "\\Bold{Z}")
        # Parentheses inside the formula are the formula's.
        self.assertEqual(display.formula_latex("<html>\\(\\displaystyle \\left(x + 1\\right)\\)</html>"),
                         "\\left(x + 1\\right)")

    def test_sage_10_writes_less_than_as_html(self):
        self.assertEqual(display.formula_latex("<html>\\(\\displaystyle x &lt; 1\\)</html>"), "x < 1")
        # Sage 9's script element holds the formula as it is.
        self.assertEqual(display.formula_latex('<script type="math/tex">x < 1</script>'), "x < 1")

    def test_sage_10_display_delimiters(self):
        self.assertEqual(display.formula_latex("<html>\\[x^{2}\\]</html>"), "x^{2}")

    def test_a_control_sequence_that_only_starts_like_displaystyle_is_kept(self):
        self.assertEqual(display.formula_latex("<html>\\(\\displaystylex\\)</html>"),
                         "\\displaystylex")

    def test_html_without_a_formula(self):
        for html in ("<b>bold</b>", "<html><table><tr><td>1</td></tr></table></html>",
                     "<html>text \\(x\\) more text</html>", ""):
            self.assertIsNone(display.formula_latex(html), html)


if __name__ == "__main__":
    unittest.main()
