"""A small synthetic corpus of another domain (King-James-style narrative) for the
domain-adaptation tests: words a vocabulary trained on Python's documentation splits into many
pieces, between common English ones. Deterministic for a seed."""

import random

DOMAIN_WORDS = ("begat", "Jehoshaphat", "Nebuchadnezzar", "thou", "shalt", "hath", "unto",
                "thereof", "wherefore", "spake", "firmament", "tabernacle", "Israel",
                "Jerusalem", "sanctuary", "righteousness", "iniquity", "brethren", "covenant",
                "Philistines", "multitude", "wilderness", "sepulchre", "prophesied")
COMMON_WORDS = ("the", "and", "of", "in", "he", "said", "to", "a", "that", "was", "for", "is",
                "with", "all", "which", "they", "them", "his", "from", "it")


def domain_lines(count: int, seed: int = 0) -> list[str]:
  """`count` sentences of 8-16 words, about a third of them domain words."""
  rng = random.Random(seed)
  lines = []
  for _ in range(count):
    words = [rng.choice(DOMAIN_WORDS if rng.random() < 0.35 else COMMON_WORDS)
             for _ in range(rng.randint(8, 16))]
    lines.append(" ".join(words).capitalize() + ".")
  return lines


def write_domain_corpus(path, count: int = 400, seed: int = 0) -> str:
  """A `.txt` corpus (documents of 20 lines) at `path`; returns its path as a string."""
  lines = domain_lines(count, seed)
  docs = ["\n".join(lines[i:i + 20]) for i in range(0, len(lines), 20)]
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n\n".join(docs) + "\n")
  return str(path)
