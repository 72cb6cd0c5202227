#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| maljan_mcp_http::fuzzing::parse_sse(data));
