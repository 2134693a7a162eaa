"""What the in-process LLM's next-token distributions say beyond the chosen tokens' log-probs:
each position's entropy and divergence from uniform (the token-level methods), the top
alternatives (CCP), and the middle-layer embedding of an answer's last token (EigenScore).
torch is imported when called, so importing this module stays cheap."""

from __future__ import annotations

from typing import Any, Sequence


def token_stats(new_ids, logits, alternatives: int = 0, rows=()) -> tuple[list, dict]:
    """From the raw logits of each generation step (temperature 1): every row's token log-probs,
    and per row and token the next-token distribution's ``entropy`` (``-sum p log p``) and
    ``kl_uniform`` (``KL(U || p) = -mean log p - log V`` over the tokens of finite log-prob,
    self-certainty's term), and for the ``rows`` given the top ``alternatives`` token ids with
    their log-probs (the chosen token first)."""
    import torch

    steps = min(len(logits), new_ids.shape[1])
    n = new_ids.shape[0]
    lp_out = torch.empty((n, steps), dtype=torch.float32)
    entropy = torch.empty((n, steps), dtype=torch.float64)
    kl = torch.empty((n, steps), dtype=torch.float64)
    alts: dict[int, list] = {r: [] for r in rows} if alternatives else {}
    for t in range(steps):
        # one fused log-softmax, one exp and two reductions over the vocabulary: the entropy
        # and KL cost about half again what the log-probs alone do
        logp = torch.log_softmax(logits[t].float(), dim=1)
        chosen = new_ids[:, t].to(logp.device).unsqueeze(1)
        lp_out[:, t] = logp.gather(1, chosen).squeeze(1).cpu()
        entropy[:, t] = (-(logp.exp() * logp).nansum(1)).double().cpu().clamp_min(0.0)
        mean_lp = logp.mean(1)
        size = torch.full_like(mean_lp, logp.shape[1])
        masked = ~torch.isfinite(mean_lp)  # a token of probability 0: the finite ones only
        if masked.any():
            finite = torch.isfinite(logp[masked])
            size[masked] = finite.sum(1).to(size.dtype)
            mean_lp[masked] = torch.where(finite, logp[masked], 0.0).sum(1) / size[masked]
        kl[:, t] = (-mean_lp.double() - torch.log(size.double())).cpu()
        for r in alts:
            top = torch.topk(logp[r], alternatives)
            chosen_id = int(new_ids[r, t])
            ids = [chosen_id] + [int(i) for i in top.indices.tolist() if int(i) != chosen_id]
            alts[r].append([(i, float(logp[r, i])) for i in ids[:alternatives]])
    stats = {"entropy": entropy.tolist(), "kl_uniform": kl.tolist(), "alternatives": alts}
    return lp_out.tolist(), stats


def last_token_embeddings(model: Any, pad_token_id: int, device: Any, prompt_ids: list[int],
                          answers: Sequence[list[int]]) -> tuple[list[list[float]], int]:
    """EigenScore's embeddings: for each answer (its token ids after ``prompt_ids``), the hidden
    state of its last token at the middle layer, from one batched forward pass (right padding,
    so positions stay put); and that layer's index into ``hidden_states`` (0 is the embedding
    layer, so the middle layer of n is n // 2)."""
    import torch

    rows = [list(prompt_ids) + list(ids) for ids in answers]
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        input_ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    with torch.inference_mode():
        out = model(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                    output_hidden_states=True)
    layer = (len(out.hidden_states) - 1) // 2
    hidden = out.hidden_states[layer].float()
    vectors = [hidden[i, len(r) - 1].cpu().double().tolist() for i, r in enumerate(rows)]
    return vectors, layer
