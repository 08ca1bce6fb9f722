"""The one walk over a scaled signature: (data, scale) pairs take two slots, others one."""

from scalify_hlo.flat_pairs import flat_positions, flat_size


def test_positions_skip_the_scale_of_each_pair() -> None:
    assert flat_positions([True, False, True, True, False]) == [0, 2, 3, 5, 7]
    assert flat_size([True, False, True, True, False]) == 8


def test_empty_and_unscaled_signatures() -> None:
    assert flat_positions([]) == [] and flat_size([]) == 0
    assert flat_positions(iter([False, False])) == [0, 1]
    assert flat_size(iter([False, False])) == 2
