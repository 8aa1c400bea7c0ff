"""Claims about engines.shipping: notebook functions travel to the engines with their globals."""

from pingpong_lab.engines.shipping import ship, unship


def test_ship_carries_the_globals_a_notebook_function_uses():
    namespace = {"__name__": "__main__"}
    exec(
        "import math\nSCALE = 3\ndef helper(x):\n    return x * SCALE\n"
        "def f(x):\n    return helper(math.floor(x))\n",
        namespace,
    )
    package = ship(namespace["f"])
    names = {name for name, _, _ in package[2]}
    assert names == {"helper", "math"}
    assert unship(package)(2.7) == 6
