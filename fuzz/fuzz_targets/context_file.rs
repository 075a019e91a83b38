//! The `context_file` fuzz target: libFuzzer's input handed to `orca::fuzzing`'s body of the same name,
//! which the corpus replay test (`tests/it/fuzz_replay.rs`) runs on the stable toolchain too.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let target = orca::fuzzing::target("context_file").expect("orca has a target of this name");
    (target.run)(data);
});
