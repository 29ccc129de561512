"""ModernBERT (Warner et al. 2024) as a second encoder family: config, layers, encoder, MLM
head, pretrainer and Hugging Face interop, exact to transformers' ModernBERT."""
