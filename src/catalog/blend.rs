//! What a tool's embedding is made of, and the blend of cosine similarity with the lexical
//! scores: plain arithmetic, which the benchmark (`benches/catalog-bench`) compiles too, so
//! that its figures for a real model are those of the code the gateway runs.

/// The text a tool is embedded from: its name, title and description, one a line.
pub(crate) fn tool_text(name: &str, title: Option<&str>, description: &str) -> String {
    format!("{name}\n{}\n{description}", title.unwrap_or_default())
}

/// Cosine similarity, 0 for an empty or zero vector or vectors of different lengths.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut norm_a, mut norm_b) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        dot += f64::from(*x) * f64::from(*y);
        norm_a += f64::from(*x) * f64::from(*x);
        norm_b += f64::from(*y) * f64::from(*y);
    }
    if norm_a == 0.0 || norm_b == 0.0 { 0.0 } else { dot / (norm_a.sqrt() * norm_b.sqrt()) }
}

/// `(1 - weight) * lexical / best lexical + weight * max(cosine, 0)` for every tool with a
/// vector; a tool without one (not embedded yet) ranks lexically only, `lexical / best lexical`.
pub(crate) fn blend(
    lexical: &[f64],
    query: &[f32],
    tools: &[Option<&[f32]>],
    weight: f64,
) -> Vec<f64> {
    let top = lexical.iter().copied().fold(0.0f64, f64::max);
    lexical
        .iter()
        .zip(tools)
        .map(|(score, vector)| {
            let lexical = if top > 0.0 { score / top } else { 0.0 };
            match vector {
                Some(vector) => (1.0 - weight) * lexical + weight * cosine(query, vector).max(0.0),
                None => lexical,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_and_blend_follow_their_formulas() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-9);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        let (up, right) = ([0.0f32, 1.0], [1.0f32, 0.0]);
        let blended =
            blend(&[2.0, 1.0, 0.0], &[1.0, 0.0], &[Some(&up), Some(&up), Some(&right)], 0.5);
        assert_eq!(blended, [0.5, 0.25, 0.5]);
    }

    #[test]
    fn a_tool_without_a_vector_keeps_its_lexical_share() {
        let right = [1.0f32, 0.0];
        let blended = blend(&[2.0, 1.0, 0.0], &[1.0, 0.0], &[None, Some(&right), None], 0.5);
        assert_eq!(blended, [1.0, 0.75, 0.0]);
    }

    #[test]
    fn a_tool_text_is_its_name_title_and_description_one_a_line() {
        assert_eq!(tool_text("fx_add", Some("Add"), "Adds a and b."), "fx_add\nAdd\nAdds a and b.");
        assert_eq!(tool_text("fx_add", None, "Adds."), "fx_add\n\nAdds.");
    }
}
