#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| maljan_mcp_stdio::fuzzing::classify_stream(data));
