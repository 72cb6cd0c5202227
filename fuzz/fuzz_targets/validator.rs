#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| maljan_mcp_proto::fuzzing::decode_and_reencode(data));
