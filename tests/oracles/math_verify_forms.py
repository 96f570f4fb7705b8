"""The answer forms math_verify_cases.py draws from.

Each category gives one answer as gold forms, forms equivalent to it and forms
that are not; a case wraps a gold form the way datasets write solutions and a
completion form the way models write answers (boxed, after "final answer is",
or with no anchor at all), or a malformed completion. Every choice goes
through the one random.Random given, so a seed fixes the whole list.
"""
from collections import namedtuple
from fractions import Fraction
from math import gcd

Case = namedtuple("Case", "category completion solution")
# gold: LaTeX of the answer; bare_gold: plain text a dataset may hold instead
# (parsed without $..$), or None; right / wrong: equivalent and different forms.
Answer = namedtuple("Answer", "gold bare_gold right wrong")

GOLD_WRAPS = ["${}$", "$${}$$", "\\({}\\)", "\\boxed{{{}}}", "The answer is $\\boxed{{{}}}$.",
              "We find that the value is ${}$.", "so $x$ works and the final answer is ${}$"]
ANCHORED = ["\\boxed{{{}}}", "So the answer is \\boxed{{{}}}.", "Thus $\\boxed{{{}}}$.",
            "**Final Answer**\n\\[\n\\boxed{{{}}}\n\\]", "The final answer is ${}$.",
            "The final answer is ${}$. I hope it is correct.", "Final Answer: $${}$$", "Answer: \\({}\\)",
            "Adding $2 + 3 = 5$ step by step, we get \\boxed{{{}}}", "The final answer is \\[{}\\]"]
UNANCHORED = ["The answer is {}", "{}", "<answer>{}</answer>", "We get ${}$.", "the result is $$ {} $$"]


def _frac(p, q, cmd="\\frac"):
    s = "-" if p * q < 0 else ""
    return f"{s}{cmd}{{{abs(p)}}}{{{abs(q)}}}"


def _thousands(n, sep):
    s = f"{abs(n):,}".replace(",", sep)
    return ("-" if n < 0 else "") + s


class Forms:
    def __init__(self, rng):
        self.r = rng

    # --- numbers ---------------------------------------------------------
    def integer(self):
        r = self.r
        n = r.choice([r.randint(0, 20), r.randint(-50, -1), r.randint(100, 999), r.randint(1000, 2_000_000)])
        right = [str(n), f"{n}.0", f"\\!{n}", f"x = {n}", f"{{{n}}}", f"\\left({n}\\right)"]
        if abs(n) >= 1000:
            right += [_thousands(n, ","), _thousands(n, "{,}"), _thousands(n, "\\,"), _thousands(n, "\\ ")]
        if n < 0:
            right += [f"- {-n}", f"-({-n})", f"\\left(-{-n}\\right)"]
        wrong = [str(n + 1), str(-n) if n else "1", str(n * 10), f"{n}.5", f"{n}, {n + 1}"]
        bare = r.choice([str(n), _thousands(n, ",")])
        return Answer(str(n), bare, right, wrong)

    def decimal(self):
        r = self.r
        places = r.choice([1, 2, 3])
        v = Fraction(r.randint(-999, 9999), 10 ** places)
        text = f"{float(v):.{places}f}"
        f = Fraction(v)
        right = [text, text + "0", _frac(f.numerator, f.denominator), _frac(f.numerator, f.denominator, "\\dfrac")]
        if text.startswith("0."):
            right.append(text[1:])
        wrong = [f"{float(v) + 10 ** -places:.{places}f}", f"{float(v) * 10:.{places}f}", str(round(v))]
        return Answer(text, text, right, wrong)

    def fraction(self):
        r = self.r
        q = r.randint(2, 16)
        p = r.choice([x for x in range(-20, 40) if x and gcd(x, q) == 1])
        k = r.randint(2, 5)
        f = Fraction(p, q)
        right = [_frac(p, q), _frac(p, q, "\\dfrac"), _frac(p, q, "\\tfrac"), _frac(k * p, k * q), f"{p}/{q}",
                 f"\\frac{{{p}}}{{{q}}}", f"{float(f):.6f}", f"\\left(\\frac{{{p}}}{{{q}}}\\right)"]
        if 0 < p < 10 and q < 10:
            right.append(f"\\frac{p}{q}")
        if p < 0:
            right.append(f"\\frac{{{-p}}}{{-{q}}}")
        if abs(p) > q:
            whole, rest = divmod(abs(p), q)
            right.append(("-" if p < 0 else "") + f"{whole}\\frac{{{rest}}}{{{q}}}")
        wrong = [_frac(q, p), _frac(p + 1, q), f"{float(f):.2f}", _frac(-p, q), f"{p}/{q + 1}"]
        gold = r.choice([_frac(p, q), _frac(p, q, "\\dfrac"), f"{p}/{q}"])
        return Answer(gold, r.choice([f"{p}/{q}", None]), right, wrong)

    def percent(self):
        r = self.r
        p = r.randint(1, 99)
        right = [f"{p}\\%", f"{p}%", f"{p} \\%", f"{p / 100:g}", _frac(p, 100), f"{p}\\text{{ percent}}"]
        wrong = [f"{p + 1}\\%", f"{p}", f"{p / 10:g}\\%"]
        gold = r.choice([f"{p}\\%", f"{p / 100:g}", _frac(p, 100)])
        return Answer(gold, r.choice([f"{p}%", f"{p / 100:g}"]), right, wrong)

    def units(self):
        r = self.r
        n = r.randint(1, 500)
        unit = r.choice(["cm", "meters", "m", "km", "inches", "feet", "dollars", "units", "square units"])
        right = [f"{n}\\text{{ {unit}}}", f"{n} \\text{{{unit}}}", f"{n}\\,\\text{{{unit}}}", f"{n} \\mbox{{ {unit}}}",
                 f"{n}^\\circ", f"{n}^{{\\circ}}", f"{n}\\text{{ degrees}}", f"\\${n}", f"{n}\\mbox{{cm}}^2",
                 f"\\text{{{n} {unit}}}", f"{n}\\ \\text{{{unit}}}"]
        wrong = [f"{n + 1}\\text{{ {unit}}}", f"{n + 1}^\\circ", f"\\${n + 1}"]
        gold = r.choice([str(n), f"{n}\\text{{ {unit}}}", f"{n}^\\circ", f"\\${n}"])
        return Answer(gold, str(n), right, wrong)

    # --- structures --------------------------------------------------------
    def interval(self):
        r = self.r
        a = r.randint(-10, 5)
        b = a + r.randint(1, 10)
        lo, hi = r.choice([("(", ")"), ("[", "]"), ("(", "]"), ("[", ")")])
        shape = r.choice(["finite", "left_inf", "right_inf", "union"])
        flip = {"(": "[", "[": "(", ")": "]", "]": ")"}
        # the relation each bracket means, in the spellings completions use
        LT = {"(": "<", "[": "\\le", ")": "<", "]": "\\leq"}
        GT = {"(": ">", "[": "\\geq"}
        if shape == "finite":
            gold = f"{lo}{a}, {b}{hi}"
            ineq = f"{a} {LT[lo]} x {LT[hi]} {b}"
            wrong = [f"{flip[lo]}{a}, {b}{hi}", f"{lo}{a}, {b + 1}{hi}", f"{lo}{b}, {a}{hi}"]
        elif shape == "left_inf":
            gold = f"(-\\infty, {b}{hi}"
            ineq = f"x {LT[hi]} {b}"
            wrong = [f"(-\\infty, {b}{flip[hi]}", f"({b}, \\infty)", f"(-\\infty, {b + 1}{hi}"]
        elif shape == "right_inf":
            gold = f"{lo}{a}, \\infty)"
            ineq = f"x {GT[lo]} {a}"
            wrong = [f"{flip[lo]}{a}, \\infty)", f"(-\\infty, {a})", f"{lo}{a - 1}, \\infty)"]
        else:
            gold = f"(-\\infty, {a}{hi} \\cup {lo}{b}, \\infty)"
            ineq = f"x {LT[hi]} {a} \\text{{ or }} x {GT[lo]} {b}"
            wrong = [f"(-\\infty, {a}{flip[hi]} \\cup {lo}{b}, \\infty)", f"{lo}{a}, {b}{hi}",
                     f"(-\\infty, {b}{hi} \\cup {lo}{a}, \\infty)"]
        right = [gold, gold.replace(" ", ""), "\\left" + gold[0] + gold[1:-1] + "\\right" + gold[-1], ineq,
                 gold.replace("\\infty", "\\infty ").replace(", ", ",\\ ")]
        if shape == "union":
            right.append(gold.replace("\\cup", "\\, \\cup \\,"))
        return Answer(gold, None, right, wrong)

    def set_(self):
        r = self.r
        elems = r.sample(range(-9, 20), r.randint(2, 4))
        perm = elems[:]
        r.shuffle(perm)
        j = ", ".join
        gold = "\\{" + j(map(str, elems)) + "\\}"
        right = [gold, "\\{" + j(map(str, perm)) + "\\}", j(map(str, perm)), "\\left\\{" + j(map(str, perm)) + "\\right\\}",
                 "\\{" + ",".join(map(str, elems)) + "\\}", " \\text{ and } ".join(map(str, elems))]
        wrong = ["\\{" + j(map(str, elems[:-1])) + "\\}", "\\{" + j(map(str, elems + [elems[0] + 100])) + "\\}",
                 j(map(str, elems[:-1]))]
        gold = r.choice([gold, j(map(str, elems))])
        return Answer(gold, None, right, wrong)

    def tuple_(self):
        r = self.r
        t = [r.randint(-9, 9) for _ in range(r.randint(2, 3))]
        if t[0] == t[1]:
            t[1] += 1
        s = ", ".join(map(str, t))
        gold = f"({s})"
        right = [gold, f"\\left({s}\\right)", f"({','.join(map(str, t))})", f"\\left( {s} \\right)", s]
        swapped = [t[1], t[0]] + t[2:]
        wrong = ["(" + ", ".join(map(str, swapped)) + ")", "(" + ", ".join(map(str, t[:-1] + [t[-1] + 1])) + ")",
                 "[" + s + "]"]
        return Answer(gold, None, right, wrong)

    def matrix(self):
        r = self.r
        rows, cols = r.choice([(2, 2), (2, 1), (3, 1), (1, 3), (3, 3), (2, 3)])
        m = [[Fraction(r.randint(-9, 9), r.choice([1, 1, 1, 2, 4])) for _ in range(cols)] for _ in range(rows)]

        def tex(x, dec=False):
            if x.denominator == 1:
                return str(x.numerator)
            return f"{float(x):g}" if dec else _frac(x.numerator, x.denominator)

        def env(name, mat, dec=False):
            body = " \\\\ ".join(" & ".join(tex(x, dec) for x in row) for row in mat)
            return f"\\begin{{{name}}} {body} \\end{{{name}}}"

        changed = [row[:] for row in m]
        changed[-1][-1] += 1
        transposed = [list(c) for c in zip(*m)]
        gold = env(r.choice(["pmatrix", "bmatrix"]), m)
        right = [env("pmatrix", m), env("bmatrix", m), env("pmatrix", m, dec=True),
                 "\\left(" + env("matrix", m) + "\\right)"]
        wrong = [env("pmatrix", changed), env("bmatrix", changed, dec=True)]
        if rows != cols or transposed != m:
            wrong.append(env("pmatrix", transposed))
        return Answer(gold, None, right, wrong)

    # --- expressions -------------------------------------------------------
    def symbolic(self):
        r = self.r
        a, b, k = r.randint(1, 9), r.randint(-9, 9), r.randint(2, 12)
        m = r.choice([2, 3, 5, 6, 7])
        choices = [
            (f"\\frac{{\\pi}}{{{k}}}", [f"\\dfrac{{\\pi}}{{{k}}}", f"\\frac{{1}}{{{k}}}\\pi", f"\\pi/{k}",
                                         f"{3.141592653589793 / k:.6f}"], [f"\\frac{{\\pi}}{{{k + 1}}}", f"{k}\\pi"]),
            (f"{a}\\sqrt{{{m}}}", [f"\\sqrt{{{a * a * m}}}", f"{a} \\sqrt {m}", f"{a}\\cdot\\sqrt{{{m}}}",
                                    f"{a * m ** 0.5:.6f}"], [f"\\sqrt{{{a * m}}}", f"{a + 1}\\sqrt{{{m}}}"]),
            (f"2^{{{k}}}", [str(2 ** k), f"2^{k}" if k < 10 else str(2 ** k), f"4^{{{k / 2:g}}}"],
             [str(2 ** k + 1), f"2^{{{k + 1}}}", str(2 * k)]),
            (f"{a}x + {b}" if b >= 0 else f"{a}x - {-b}", [f"{b} + {a}x", f"{a}\\cdot x + {b}", f"y = {a}x + {b}",
                                                           f"\\left({a}x + {b}\\right)"],
             [f"{a}x - {b + 1}", f"{a + 1}x + {b}", f"{a}y + {b}"]),
            (f"(x + {abs(b) + 1})^2", [f"x^2 + {2 * (abs(b) + 1)}x + {(abs(b) + 1) ** 2}",
                                       f"x^{{2}}+{2 * (abs(b) + 1)}x+{(abs(b) + 1) ** 2}"],
             [f"x^2 + {(abs(b) + 1) ** 2}", f"(x - {abs(b) + 1})^2"]),
            (f"x = {b}", [str(b), f"x={b}", f"x \\; = \\; {b}", f"y = {b}"], [f"x = {b + 1}", f"x = -{abs(b) + 1}"]),
            (f"{a}e^{{{k}}}", [f"{a}\\exp({k})", f"{a}\\mathrm{{e}}^{{{k}}}"], [f"{a}e^{{{k + 1}}}"]),
            (f"\\log_{{2}} {2 ** a}", [str(a), f"\\log_2 {{{2 ** a}}}"], [str(a + 1)]),
        ]
        gold, right, wrong = r.choice(choices)
        return Answer(gold, None, [gold] + right, wrong)

    # --- whole cases -------------------------------------------------------
    CATEGORIES = [("integer", 6), ("decimal", 4), ("fraction", 6), ("percent", 3), ("units", 4),
                  ("interval", 5), ("set", 4), ("tuple", 3), ("matrix", 3), ("symbolic", 6)]

    def answer(self, category):
        return getattr(self, {"set": "set_", "tuple": "tuple_"}.get(category, category))()

    def wrapped_gold(self, ans):
        r = self.r
        if ans.bare_gold is not None and r.random() < 0.4:
            return ans.bare_gold
        return r.choice(GOLD_WRAPS).format(ans.gold)

    def completion(self, latex):
        r = self.r
        u = r.random()
        if u < 0.8:
            return r.choice(ANCHORED).format(latex)
        return r.choice(UNANCHORED).format(latex)

    def malformed(self, latex):
        r = self.r
        forms = ["\\boxed{", "\\boxed{}", f"\\boxed{{{latex}", f"\\boxed{{{{{latex}}}", f"\\boxed{{{latex}}}}}",
                 "The final answer is $$", f"The final answer is ${latex}", f"\\boxed{{\\frac{{{latex}}}{{}}}}",
                 "\\boxed{)(}", f"\\boxed{{\\left( {latex}}}", f"\\boxed{{{latex} \\right)}}",
                 f"\\boxed{{\\sqrt{{{latex}}}", f"\\boxed{{ }} {latex}", f"$\\boxed{{{latex}$}}"]
        return r.choice(forms)

    def several_boxes(self, ans):
        r = self.r
        a, b = r.choice(ans.right), r.choice(ans.right + ans.wrong)
        gap = r.choice([", ", " and ", " or ", ". Checking: " + "." * r.randint(60, 90) + " "])
        return f"\\boxed{{{a}}}{gap}\\boxed{{{b}}}"

    def one(self):
        r = self.r
        names = [c for c, _ in self.CATEGORIES]
        category = r.choices(names, weights=[w for _, w in self.CATEGORIES])[0]
        ans = self.answer(category)
        solution = self.wrapped_gold(ans)
        u = r.random()
        if u < 0.55:
            return Case(category, self.completion(r.choice(ans.right)), solution)
        if u < 0.82:
            return Case(category + "/wrong", self.completion(r.choice(ans.wrong)), solution)
        if u < 0.92:
            return Case(category + "/malformed", self.malformed(r.choice(ans.right)), solution)
        return Case(category + "/several_boxes", self.several_boxes(ans), solution)

    def unparseable_gold(self):
        r = self.r
        gold = r.choice(["No solution exists", "\\text{Monday}", "[0,1]", "", "x", "\\frac{\\pi}{4}",
                         "yes", "(1, 2)", "\\{1, 2\\}", "$\\text{even}$", "$$", "\\boxed{}"])
        ans = self.integer()
        return Case("gold_unparseable", self.completion(r.choice(ans.right + [gold])), gold)

    def cases(self, count):
        out, seen = [], set()
        while len(out) < count:
            c = self.unparseable_gold() if self.r.random() < 0.03 else self.one()
            if (c.completion, c.solution) not in seen:
                seen.add((c.completion, c.solution))
                out.append(c)
        return out
