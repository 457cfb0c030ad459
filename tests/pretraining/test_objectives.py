"""MLM masking statistics and determinism, CLM labels at document boundaries, the phase switch."""
import pytest
import torch

from pretraining.objectives import clm_labels, mask_for_mlm, objective_generator, phase_at

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
    masked, labels = mask_for_mlm(ids, objective_generator(0, 0, 0), ratio, MASK, SPECIAL, VOCAB)
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
    masked, labels = mask_for_mlm(ids, objective_generator(1, 5, 0), 0.4, MASK, SPECIAL, VOCAB,
                                  replace=(0.8, 0.1, 0.1))
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


def test_masks_depend_only_on_seed_step_and_rank():
    ids = _tokens(10_000)

    def draw(seed, step, rank):
        return mask_for_mlm(ids, objective_generator(seed, step, rank), 0.4, MASK, SPECIAL, VOCAB)[1]

    assert torch.equal(draw(3, 7, 0), draw(3, 7, 0))
    for other in [(4, 7, 0), (3, 8, 0), (3, 7, 1)]:
        assert not torch.equal(draw(3, 7, 0), draw(*other))


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
