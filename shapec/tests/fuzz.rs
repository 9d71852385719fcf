//! Fuzzing in `cargo test` (no nightly toolchain needed): arbitrary bytes
//! through the program parser and compiler, and through the `.npy` reader,
//! both as raw bytes and as mutations of a valid file. Nothing may panic;
//! every refusal is a typed error.

use proptest::prelude::*;
use shape_lang::compile::compile;
use shape_lang::syntax;
use shapec::npy::{self, Array};

/// A valid `.npy` file to mutate.
fn valid_npy() -> Vec<u8> {
    npy::to_bytes(&Array {
        shape: vec![2, 3],
        data: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    })
    .unwrap()
}

/// Reads `bytes` as a `.npy` file both ways: whole, and as a stream whose
/// length is not known beforehand.
fn read_both_ways(bytes: &[u8]) {
    let whole = npy::read(bytes);
    let mut r = bytes;
    let streamed = npy::read_header(&mut r).and_then(|h| npy::read_data(h, r, None));
    // The two agree on whether the file is good, and on its values, bit
    // for bit (a mutated byte may make a NaN, which `==` never matches).
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    match (&whole, &streamed) {
        (Ok(a), Ok(data)) => assert_eq!(bits(&a.data), bits(data)),
        (Err(_), Err(_)) => {}
        _ => panic!("whole {whole:?} vs streamed {streamed:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_through_the_parser_and_compiler(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(program) = syntax::parse(&text) {
            if let Ok(compiled) = compile(&program) {
                let _ = compiled.solve();
            }
        }
    }

    #[test]
    fn arbitrary_bytes_through_the_npy_reader(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        read_both_ways(&bytes);
        // Behind a valid magic string and version, the header is reached.
        for version in [[1u8, 0], [2, 0], [3, 0]] {
            let mut b = b"\x93NUMPY".to_vec();
            b.extend_from_slice(&version);
            b.extend_from_slice(&bytes);
            read_both_ways(&b);
        }
    }

    #[test]
    fn mutated_npy_files(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut b = valid_npy();
        for (at, byte) in edits {
            let i = at.index(b.len());
            b[i] = byte;
        }
        if truncate {
            b.truncate(cut.index(b.len() + 1));
        }
        read_both_ways(&b);
    }

    #[test]
    fn header_texts(text in "\\{'(descr|shape|fortran_order)': [ -~]{0,60}\\}") {
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(text.len() as u16).to_le_bytes());
        b.extend_from_slice(text.as_bytes());
        read_both_ways(&b);
    }
}
