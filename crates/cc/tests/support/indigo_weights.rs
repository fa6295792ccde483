//! Indigo weights files built in the test, for the tests that need a network of a given size or
//! a given fixed action (tests/indigo.rs, tests/no_alloc.rs). The safetensors format is written
//! by hand (an 8-byte little-endian header length, a JSON header, the raw data), so that a bad
//! file is as easy to make as a good one.

/// One tensor: name, dtype, shape, raw little-endian data.
pub type Tensor = (&'static str, &'static str, Vec<usize>, Vec<u8>);

/// A safetensors file of `tensors`, in their order.
pub fn safetensors_bytes(tensors: &[Tensor]) -> Vec<u8> {
    let mut entries = Vec::new();
    let mut offset = 0;
    for (name, dtype, shape, data) in tensors {
        let shape: Vec<String> = shape.iter().map(usize::to_string).collect();
        let end = offset + data.len();
        entries.push(format!(
            "\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            shape.join(",")
        ));
        offset = end;
    }
    let mut header = format!("{{{}}}", entries.join(",")).into_bytes();
    header.resize(header.len().div_ceil(8) * 8, b' ');
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend(header);
    for (_, _, _, data) in tensors {
        file.extend(data);
    }
    file
}

/// The five tensors of an `hidden`-unit network as `safetensors_bytes` takes them: LSTM weights
/// pseudo-random in (−0.5, 0.5) from `seed`, head weights scaled by `head_scale`, head bias
/// `head_bias` (a large entry with `head_scale` 0 fixes the action).
pub fn indigo_tensors(hidden: usize, seed: u64, head_scale: f32, head_bias: [f32; 5]) -> Vec<Tensor> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut random = |n: usize, scale: f32| -> Vec<u8> {
        (0..n)
            .flat_map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let unit = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                (unit * scale).to_le_bytes()
            })
            .collect()
    };
    let gates = 4 * hidden;
    vec![
        ("lstm.weight_ih", "F32", vec![gates, 9], random(gates * 9, 1.0)),
        ("lstm.weight_hh", "F32", vec![gates, hidden], random(gates * hidden, 1.0)),
        ("lstm.bias", "F32", vec![gates], random(gates, 1.0)),
        ("head.weight", "F32", vec![5, hidden], random(5 * hidden, head_scale)),
        ("head.bias", "F32", vec![5], head_bias.iter().flat_map(|b| b.to_le_bytes()).collect()),
    ]
}

/// A whole weights file (see `indigo_tensors`).
pub fn indigo_weights(hidden: usize, seed: u64, head_scale: f32, head_bias: [f32; 5]) -> Vec<u8> {
    safetensors_bytes(&indigo_tensors(hidden, seed, head_scale, head_bias))
}
