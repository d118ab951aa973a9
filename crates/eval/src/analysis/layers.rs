use crate::analysis::AnalysisError;

/// Parses `--layers 1,7,21,28` (1-based, as in the paper) into 0-based layer indices, refusing a
/// layer the model does not have.
pub fn parse_layers(text: &str, num_layers: usize) -> Result<Vec<usize>, AnalysisError> {
    let mut layers = Vec::new();
    for item in text.split(',').map(str::trim) {
        let layer: usize = item.parse().map_err(|_| {
            AnalysisError::BadLayers(format!(
                "`{item}` is not a layer number (give 1-based numbers, e.g. 1,7,21,28)"
            ))
        })?;
        if layer == 0 {
            return Err(AnalysisError::BadLayers(
                "layers are numbered from 1 (layer 1 is the first)".into(),
            ));
        }
        if layer > num_layers {
            return Err(AnalysisError::LayerOutOfRange {
                layer,
                layers: num_layers,
            });
        }
        if !layers.contains(&(layer - 1)) {
            layers.push(layer - 1);
        }
    }
    Ok(layers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_are_one_based_and_bounded() {
        assert_eq!(parse_layers("1,7, 21,28", 28).unwrap(), vec![0, 6, 20, 27]);
        assert_eq!(parse_layers("2,2", 4).unwrap(), vec![1]);
        let error = parse_layers("1,5", 4).unwrap_err().to_string();
        assert!(
            error.contains("--layers 5") && error.contains("4 layers"),
            "{error}"
        );
        assert!(parse_layers("0", 4).is_err());
        assert!(
            parse_layers("x", 4)
                .unwrap_err()
                .to_string()
                .contains("`x`")
        );
    }
}
