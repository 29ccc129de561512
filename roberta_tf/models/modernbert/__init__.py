"""ModernBERT (Warner et al. 2024) as a second encoder family, exact to transformers 5.23's
ModernBertForMaskedLM (../shared/modernbert.md):

- modernbert_config: `ModernBertConfig`, presets tiny..large, `count_parameters`;
- modernbert_hf_config: HF config.json (legacy and 5.x dialects) <-> ModernBertConfig;
- rotary_embedding, windowed_attention (`attend`, the one attention function), modernbert_init;
- modernbert_layers (embeddings, encoder layer), modernbert_encoder, modernbert_mlm_head,
  modernbert_pretrainer (`ModernBertPretrainer`, RobertaPretrainer's interface);
- modernbert_task_heads (`ModernBertTaskModel`: HF's sequence / token classification heads);
- modernbert_hf_weights, modernbert_hf_tasks: HF safetensors folders in and out.
"""
