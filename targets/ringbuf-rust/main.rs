// ringbuf-rust: the ring buffer in Rust, for sampler's tests of Rust names and values:
// `main::Ring` with AtomicU64 indexes and a String name, a Cell in the reporter,
// one writer and one reader thread; prints like ringbuf-c. `make targets` builds it
// without optimization (-C opt-level=0): at -O1 and above rustc keeps report's
// parameters in registers only until their last use, so they are optimized out at the
// breakpoint.
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

#[allow(dead_code)] // name is only read by sampler
pub struct Ring {
    r: AtomicU64,
    w: AtomicU64,
    capacity: u64,
    buf: Vec<AtomicU64>,
    name: String,
}

impl Ring {
    #[inline(never)]
    pub fn write(&self, v: u64) -> bool {
        let at = self.w.load(Ordering::Relaxed);
        if at - self.r.load(Ordering::Acquire) >= self.capacity {
            return false;
        }
        self.buf[(at % self.capacity) as usize].store(v, Ordering::Relaxed);
        self.w.store(at + 1, Ordering::Release);
        true
    }

    #[inline(never)]
    pub fn read(&self) -> Option<u64> {
        let at = self.r.load(Ordering::Relaxed);
        if at == self.w.load(Ordering::Acquire) {
            return None;
        }
        let v = self.buf[(at % self.capacity) as usize].load(Ordering::Relaxed);
        self.r.store(at + 1, Ordering::Release);
        Some(v)
    }

    /// Called once a second by the reporter with its tag and the seconds so far.
    #[inline(never)]
    pub fn report(&self, tag: &str, seconds: &Cell<u64>) -> u64 {
        seconds.get() + tag.len() as u64 * 0
    }
}

static READS: AtomicU64 = AtomicU64::new(0);
static WRITES: AtomicU64 = AtomicU64::new(0);

fn main() {
    let capacity = 20000;
    let ring: &'static Ring = Box::leak(Box::new(Ring {
        r: AtomicU64::new(0),
        w: AtomicU64::new(0),
        capacity,
        buf: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
        name: String::from("ring-rust"),
    }));
    thread::spawn(move || {
        let mut v = 0;
        loop {
            if ring.write(v) {
                v += 1;
                WRITES.fetch_add(1, Ordering::Relaxed);
            } else {
                thread::yield_now();
            }
        }
    });
    thread::spawn(move || loop {
        if ring.read().is_some() {
            READS.fetch_add(1, Ordering::Relaxed);
        } else {
            thread::yield_now();
        }
    });
    println!("ready pid={}", std::process::id());
    let seconds = Cell::new(0u64);
    let (mut last_r, mut last_w) = (0, 0);
    loop {
        thread::sleep(Duration::from_secs(1));
        seconds.set(seconds.get() + 1);
        ring.report("tick", &seconds);
        let (r, w) = (READS.load(Ordering::Relaxed), WRITES.load(Ordering::Relaxed));
        println!("reads/s={} writes/s={}", r - last_r, w - last_w);
        last_r = r;
        last_w = w;
    }
}
