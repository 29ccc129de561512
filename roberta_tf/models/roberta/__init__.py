"""RoBERTa (Liu et al. 2019), the first encoder family (models/registry.py):

- config: `RobertaConfig`, presets tiny..large, `count_parameters`;
- embeddings, transformer_layer, encoder (`build_encoder`), mlm_head, nsp_head (the input-format
  ablation's), pretrainer (`RobertaPretrainer`);
- hf_weights (HF RobertaForMaskedLM folders both ways), keras_hub_weights, keras_hub_preset;
- position_growth: a longer learned position table (models/growth.py uses it).

What the families share stays beside them in roberta_tf/models/ (model_dir, checkpoint_files,
initializers, fused_ops, flops, growth, pseudo_log_likelihood, registry).
"""
