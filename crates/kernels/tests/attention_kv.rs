//! KV storage: round trips per dtype, capacity discipline, sizes for memory planning.

use gattn_kernels::attention::{KvDtype, KvError, KvLayer};

fn rows(n: usize, width: usize) -> Vec<f32> {
    (0..n * width)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
        .collect()
}

#[test]
fn round_trip_within_dtype_precision() {
    for head_dim in [64, 65, 72, 3] {
        let (kvh, n) = (3, 5);
        let k = rows(n, kvh * head_dim);
        let v: Vec<f32> = k.iter().map(|x| -x * 0.5).collect();
        for (dtype, tol) in [
            (KvDtype::F32, 0.0),
            (KvDtype::Bf16, 1.0 / 128.0),
            (KvDtype::Int8, 1.0 / 127.0),
        ] {
            let mut layer = KvLayer::new(dtype, kvh, head_dim).unwrap();
            layer.reserve(n).unwrap();
            layer.append(&k, &v).unwrap();
            for j in 0..kvh {
                let (dk, dv) = (layer.dequantized_k(j), layer.dequantized_v(j));
                assert_eq!(dk.len(), n * head_dim);
                for t in 0..n {
                    let src_k = &k[t * kvh * head_dim + j * head_dim..][..head_dim];
                    let src_v = &v[t * kvh * head_dim + j * head_dim..][..head_dim];
                    let max_k = src_k.iter().fold(0.0f32, |m, x| m.max(x.abs()));
                    for e in 0..head_dim {
                        let bound =
                            tol * if dtype == KvDtype::Int8 {
                                max_k
                            } else {
                                src_k[e].abs()
                            } + 1e-7;
                        assert!(
                            (dk[t * head_dim + e] - src_k[e]).abs() <= bound,
                            "{dtype} d={head_dim} K"
                        );
                        let bound_v = tol * src_v.iter().fold(0.0f32, |m, x| m.max(x.abs())) + 1e-7;
                        assert!(
                            (dv[t * head_dim + e] - src_v[e]).abs() <= bound_v,
                            "{dtype} d={head_dim} V"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn append_needs_reserved_capacity_and_whole_rows() {
    let mut layer = KvLayer::new(KvDtype::Bf16, 2, 4).unwrap();
    let row = rows(1, 8);
    assert!(matches!(
        layer.append(&row, &row),
        Err(KvError::CapacityExceeded { .. })
    ));
    layer.reserve(2).unwrap();
    assert_eq!(layer.capacity(), 2);
    layer.append(&row, &row).unwrap();
    assert!(matches!(
        layer.append(&row[..7], &row[..7]),
        Err(KvError::BadRowLength { .. })
    ));
    assert!(matches!(
        layer.append(&rows(2, 8), &row),
        Err(KvError::KvRowMismatch { .. })
    ));
    layer.append(&row, &row).unwrap();
    let full = layer.append(&row, &row).unwrap_err();
    assert!(
        matches!(
            full,
            KvError::CapacityExceeded {
                rows: 1,
                len: 2,
                capacity: 2
            }
        ),
        "{full}"
    );
    assert_eq!(layer.len(), 2);
    layer.truncate(1);
    assert_eq!((layer.len(), layer.capacity()), (1, 2));
    layer.append(&row, &row).unwrap();
    let empty = KvLayer::new(KvDtype::F32, 0, 4).unwrap_err();
    assert!(
        matches!(
            empty,
            KvError::EmptyShape {
                num_kv_heads: 0,
                head_dim: 4
            }
        ),
        "{empty}"
    );
    assert!(empty.to_string().contains("num_kv_heads"), "{empty}");
}

#[test]
fn bytes_per_token_counts_words_and_scales() {
    // Qwen3-1.7B layer: 8 kv heads x 128, K and V.
    assert_eq!(
        KvLayer::bytes_per_token_for(KvDtype::F32, 8, 128),
        2 * 8 * 512
    );
    assert_eq!(
        KvLayer::bytes_per_token_for(KvDtype::Bf16, 8, 128),
        2 * 8 * 256
    );
    assert_eq!(
        KvLayer::bytes_per_token_for(KvDtype::Int8, 8, 128),
        2 * 8 * (128 + 4)
    );
    // Odd dims pad to whole words.
    assert_eq!(
        KvLayer::bytes_per_token_for(KvDtype::Bf16, 1, 65),
        2 * 33 * 4
    );
}

#[test]
fn reserving_a_long_context_is_cheap_until_filled() {
    // 131072 tokens x 8 heads x 128 in bf16 = 512 MiB reserved; nothing is written yet.
    let mut layer = KvLayer::new(KvDtype::Bf16, 8, 128).unwrap();
    layer.reserve(131_072).unwrap();
    assert_eq!(layer.capacity(), 131_072);
    assert!(layer.is_empty());
    layer.reserve(1000).unwrap();
    assert_eq!(layer.capacity(), 131_072, "reserve never shrinks");
}
