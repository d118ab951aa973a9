//! `gattn_eval::analysis` on a builtin (trained) checkpoint: the streamed statistics against the
//! materialized maps, whatever the chunking.

use gattn_eval::analysis::{LayerMap, head_averaged_maps, sink_statistics};
use gattn_model::layers::attention::LayerProbe;
use gattn_model::{Backend, BuiltinModel, Qwen3Model, Tokenizer, WeightFormat};

const TEXT: &str = "It is a truth universally acknowledged, that a single man in possession of a \
    good fortune, must be in want of a wife. However little known the feelings or views of such a \
    man may be on his first entering a neighbourhood, this truth is so well fixed in the minds of \
    the surrounding families, that he is considered as the rightful property of some one or other \
    of their daughters. My dear Mr. Bennet, said his lady to him one day, have you heard that \
    Netherfield Park is let at last? Mr. Bennet replied that he had not. But it is, returned she; \
    for Mrs. Long has just been here, and she told me all about it.";

fn load(model: BuiltinModel) -> (tempfile::TempDir, Qwen3Model, Vec<u32>) {
    let cache = tempfile::tempdir().unwrap();
    let dir = model.materialize_in(cache.path()).unwrap();
    let tokens = Tokenizer::from_dir(&dir).unwrap().encode(TEXT).unwrap();
    (
        cache,
        Qwen3Model::load(&dir, WeightFormat::F32).unwrap(),
        tokens,
    )
}

/// The first-token share streamed by the kernel, in chunks of 7 tokens or in one call, equals
/// the mean over queries of column 0 of the materialized (head-averaged) maps; the gate means
/// and the activation maximum do not depend on the chunking either.
#[test]
fn streamed_sink_share_equals_the_materialized_maps_in_any_chunking() {
    for builtin in [BuiltinModel::Baseline, BuiltinModel::Elementwise] {
        let (_cache, mut model, tokens) = load(builtin);
        let n = tokens.len();
        assert!(n > 512, "the prompt spans several chunks: {n} tokens");
        let layers: Vec<usize> = (0..model.layers.len()).collect();
        // Maps come from the reference backend, streamed statistics from the fused kernel.
        model.backend = Backend::Reference;
        let maps = head_averaged_maps(&model, &tokens, &layers).unwrap();
        model.backend = Backend::Fast;
        model.prefill_chunk = n;
        let whole = sink_statistics(&model, &tokens).unwrap();
        model.prefill_chunk = 7;
        let chunked = sink_statistics(&model, &tokens).unwrap();
        // Empty results would make the loop below check nothing.
        assert_maps_cover(&maps, layers.len(), n);
        assert_eq!(
            whole.len(),
            layers.len(),
            "{builtin}: one statistic per layer"
        );
        assert_eq!(
            chunked.len(),
            layers.len(),
            "{builtin}: one statistic per layer"
        );
        for (layer, map) in maps.iter().enumerate() {
            let from_maps = (0..n).map(|q| map.probs[q * n] as f64).sum::<f64>() / n as f64;
            for stats in [&whole[layer], &chunked[layer]] {
                let streamed = stats.attention.sink_share().unwrap();
                assert!(
                    (from_maps - streamed).abs() < 1e-5,
                    "{builtin} layer {layer}: maps {from_maps}, streamed {streamed}"
                );
            }
            let (a, b) = (&whole[layer], &chunked[layer]);
            assert_eq!(a.attention.gate_count, b.attention.gate_count);
            if let (Some(x), Some(y)) = (a.attention.mean_gate(), b.attention.mean_gate()) {
                assert!(
                    (x - y).abs() < 1e-5,
                    "{builtin} layer {layer}: gate {x} vs {y}"
                );
            }
            assert!(a.max_abs_hidden > 0.0);
            assert!((a.max_abs_hidden - b.max_abs_hidden).abs() <= 1e-4 * a.max_abs_hidden);
            assert_eq!(a.max_abs_position, b.max_abs_position);
        }
    }
}

/// The largest activation reported for a layer is max |h| of the residual stream after it:
/// recomputed here by running the layers one by one, and the maps of a layer are causal rows
/// that sum to one.
#[test]
fn max_abs_hidden_is_the_largest_residual_activation() {
    let (_cache, mut model, tokens) = load(BuiltinModel::Headwise);
    let tokens = &tokens[..40];
    let n = tokens.len();
    model.prefill_chunk = 16;
    model.backend = Backend::Fast;
    let stats = sink_statistics(&model, tokens).unwrap();
    assert_eq!(stats.len(), model.layers.len(), "one statistic per layer");

    let h = model.config.hidden_size;
    let mut hidden = vec![0.0; n * h];
    model.embed_tokens.forward(tokens, &mut hidden).unwrap();
    let rope = model.rope.angles(0, n);
    let mut cache = model.new_cache(n);
    let mut scratch = gattn_model::scratch::LayerScratch::default();
    for (index, layer) in model.layers.iter().enumerate() {
        layer
            .forward(
                &mut hidden,
                n,
                &rope,
                cache.layer_mut(index),
                Backend::Fast,
                LayerProbe::None,
                &mut scratch,
            )
            .unwrap();
        let (position, max) = hidden
            .iter()
            .enumerate()
            .map(|(i, v)| (i / h, v.abs()))
            .fold((0, 0.0f32), |best, x| if x.1 > best.1 { x } else { best });
        let got = &stats[index];
        assert!(
            (got.max_abs_hidden - max).abs() <= 1e-4 * max,
            "layer {index}: {} vs {max}",
            got.max_abs_hidden
        );
        assert_eq!(got.max_abs_position, position, "layer {index}");
        let gate = got.attention.mean_gate().unwrap();
        assert!((0.0..=1.0).contains(&gate), "layer {index}: gate {gate}");
    }

    model.backend = Backend::Reference;
    let maps = head_averaged_maps(&model, tokens, &[0, 3]).unwrap();
    assert_maps_cover(&maps, 2, n);
    for map in &maps {
        for q in 0..n {
            let row = &map.probs[q * n..][..n];
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-4, "row {q}");
            assert!(row[q + 1..].iter().all(|&p| p == 0.0), "row {q} is causal");
        }
    }
}

/// `count` maps of `n x n` probabilities, each row holding some mass (not all zero).
fn assert_maps_cover(maps: &[LayerMap], count: usize, n: usize) {
    assert!(n > 0, "no tokens");
    assert_eq!(maps.len(), count, "one map per layer asked for");
    for map in maps {
        assert_eq!(map.probs.len(), n * n, "an n x n map");
        assert!(
            map.probs
                .chunks_exact(n)
                .all(|row| row.iter().sum::<f32>() > 0.5)
        );
    }
}
