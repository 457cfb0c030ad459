"""MLM masking statistics and determinism, CLM labels at document boundaries, the phase switch."""

import pytest
import torch

from pretraining.objectives import clm_labels, mask_for_mlm, phase_at, sample_generators

SPECIAL = (0, 1, 2)  # bos, eos = pad, mask
MASK, VOCAB = 2, 1000


def _tokens(n=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (n // 500, 500), generator=g)
    ids[:, ::50] = 0  # some bos / eos
    ids[:, 1::50] = 1
    return ids


@pytest.mark.parametrize("ratio", [0.2, 0.4, 0.5])
def test_selection_rate_and_specials_never_selected(ratio):
    ids = _tokens()
    masked, labels = mask_for_mlm(ids, sample_generators(0, range(len(ids))), ratio, MASK, SPECIAL, VOCAB)
    selected = labels != -100
    special = torch.isin(ids, torch.tensor(SPECIAL))
    assert not (selected & special).any()
    rate = selected.sum().item() / (~special).sum().item()
    assert abs(rate - ratio) < 0.01
    # Paper default: every selected token becomes the mask token, labels hold the originals.
    assert (masked[selected] == MASK).all() and (labels[selected] == ids[selected]).all()
    assert (masked[~selected] == ids[~selected]).all()


def test_80_10_10_bands_and_random_tokens_from_the_regular_vocabulary():
    ids = _tokens()
    masked, labels = mask_for_mlm(
        ids, sample_generators(1, range(len(ids))), 0.4, MASK, SPECIAL, VOCAB, replace=(0.8, 0.1, 0.1)
    )
    selected = labels != -100
    n = selected.sum().item()
    as_mask = (masked[selected] == MASK).float().mean().item()
    unchanged = (masked[selected] == ids[selected]).float().mean().item()
    assert abs(as_mask - 0.8) < 0.01
    # a random draw equals the original 1/997 of the time: a tiny excess over 10 %
    assert abs(unchanged - 0.1) < 0.01
    assert abs(1 - as_mask - unchanged - 0.1) < 0.01
    randoms = masked[selected & (masked != MASK) & (masked != ids)]
    assert len(randoms) > 0.09 * n and not torch.isin(randoms, torch.tensor(SPECIAL)).any()
    assert randoms.min() >= 3 and randoms.max() < VOCAB


def test_a_sample_mask_depends_only_on_the_seed_and_its_global_index():
    """Whatever batch a sample lands in (its rank, micro-batch, position, neighbours), it gets the
    same mask: masks do not depend on the number of ranks or on the micro-batch size."""
    ids = _tokens(8 * 500)
    index = torch.arange(100, 108)

    def draw(seed, rows, idx):
        return mask_for_mlm(ids[rows], sample_generators(seed, idx), 0.4, MASK, SPECIAL, VOCAB, replace=(0.8, 0.1, 0.1))

    whole = draw(3, slice(None), index)
    for parts in ([slice(0, 4), slice(4, 8)], [slice(0, 1), slice(1, 3), slice(3, 8)]):  # 2 ranks, micro-batches
        pieces = [draw(3, part, index[part]) for part in parts]
        assert torch.equal(torch.cat([m for m, _ in pieces]), whole[0])
        assert torch.equal(torch.cat([lab for _, lab in pieces]), whole[1])
    shuffled = torch.tensor([5, 2, 7, 0, 1, 6, 3, 4])  # the same samples in another order
    masked, labels = draw(3, shuffled, index[shuffled])
    assert torch.equal(masked, whole[0][shuffled]) and torch.equal(labels, whole[1][shuffled])
    assert not torch.equal(draw(4, slice(None), index)[1], whole[1])  # another seed
    assert not torch.equal(draw(3, slice(None), index + 8)[1], whole[1])  # other sample indices
    with pytest.raises(ValueError, match="one per row"):
        draw(3, slice(None), index[:4])


def test_clm_labels_never_cross_a_document_boundary():
    ids = torch.tensor([[0, 10, 11, 1, 0, 20, 21, 22, 1, 0]])
    docs = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1, 1, 2]])
    labels = clm_labels(ids, docs)
    assert labels.tolist() == [[10, 11, 1, -100, 20, 21, 22, 1, -100, -100]]
    # Padding (document id < 0) has no label and is no target.
    docs_pad = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1, 1, -1]])
    assert clm_labels(ids, docs_pad)[0, -2:].tolist() == [-100, -100]
    # Without document ids: plain shift; pad_id drops pad targets.
    assert clm_labels(ids)[0, :3].tolist() == [10, 11, 1]
    assert clm_labels(ids, pad_id=1)[0, 2].item() == -100


def test_phase_is_a_pure_function_of_the_step():
    assert phase_at(0, "clm", None).is_causal and not phase_at(0, "mlm", None).is_causal
    assert phase_at(9, "clm_then_mlm", 10).objective == "clm"
    assert phase_at(10, "clm_then_mlm", 10).objective == "mlm"
    assert not phase_at(10, "clm_then_mlm", 10).is_causal
    with pytest.raises(ValueError):
        phase_at(0, "clm_then_mlm", None)
