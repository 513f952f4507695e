// Rust: calls of known length and result (trace --latency), as targets/latency/latency.c's work mode.
//
//   latency-rust CALLS   work(i, k): busy k x 100 us (k = 1 + i % 5), returns 1000 * i + k
//
// Waits for a tracer's change of work()'s first 64 bytes, then writes "call I K NS RESULT" per call,
// "done calls=N", and waits to be killed.
use std::io::Write;
use std::time::{Duration, Instant};

#[inline(never)]
#[no_mangle]
pub fn work(i: u64, k: u64) -> u64 {
    let end = Instant::now() + Duration::from_micros(100 * k);
    while Instant::now() < end {}
    1000 * i + k
}

fn main() {
    let calls: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let function = work as *const u8;
    let before: Vec<u8> = unsafe { std::slice::from_raw_parts(function, 64).to_vec() };
    let mut out = std::io::stdout();
    writeln!(out, "ready pid={}", std::process::id()).unwrap();
    out.flush().unwrap();
    let mut waited = 0;
    let now = || -> Vec<u8> { (0..64).map(|n| unsafe { std::ptr::read_volatile(function.add(n)) }).collect() };
    while now() == before {
        waited += 1;
        if waited > 60000 {
            eprintln!("latency-rust: no tracer came in 60 s");
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    for i in 0..calls {
        let k = 1 + i % 5;
        let t0 = Instant::now();
        let r = std::hint::black_box(work(std::hint::black_box(i), k));
        let ns = t0.elapsed().as_nanos();
        writeln!(out, "call {} {} {} {}", i, k, ns, r).unwrap();
        out.flush().unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    writeln!(out, "done calls={}", calls).unwrap();
    out.flush().unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
