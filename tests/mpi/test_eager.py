from pingpong_lab.course import eager


def test_a_smaller_cell_moves_the_deadlock_to_a_smaller_size():
    default = eager.deadlock_size(None)
    smaller = eager.deadlock_size(2048)
    assert smaller == 2048
    assert default == -1 or default > smaller
