//! The two prefix-index workloads, generated deterministically.
//!
//! W1: 64 endpoints; 2,000 shared 8 KB system prompts, each request adding a unique 8 KB suffix
//! (16 KB ≈ 4k pseudo tokens); the index is warmed with 10,000 requests.
//! W2: 100 endpoints; 200 shared 200 KB documents, each request adding a unique 200 KB suffix
//! (400 KB ≈ 100k pseudo tokens); warmed with 2,000 requests.
//! Warm request `k` uses shared prefix `k % shared` and goes to a pseudo-random endpoint.

#![allow(dead_code)]

/// One workload's shape.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    pub name: &'static str,
    pub endpoints: usize,
    pub shared_prompts: usize,
    pub shared_bytes: usize,
    pub suffix_bytes: usize,
    pub warm_requests: usize,
}

pub const W1: Workload = Workload {
    name: "W1",
    endpoints: 64,
    shared_prompts: 2_000,
    shared_bytes: 8 * 1024,
    suffix_bytes: 8 * 1024,
    warm_requests: 10_000,
};

pub const W2: Workload = Workload {
    name: "W2",
    endpoints: 100,
    shared_prompts: 200,
    shared_bytes: 200 * 1024,
    suffix_bytes: 200 * 1024,
    warm_requests: 2_000,
};

/// Index block size in pseudo tokens (256 bytes).
pub const BLOCK_TOKENS: usize = 64;

/// splitmix64: a tiny deterministic generator.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Appends `len` random lower-case letters to `out`.
    pub fn fill_text(&mut self, out: &mut String, len: usize) {
        let mut left = len;
        while left > 0 {
            let word = self.next_u64().to_le_bytes();
            for b in word.iter().take(left) {
                out.push(char::from(b'a' + b % 26));
            }
            left = left.saturating_sub(8);
        }
    }
}

/// A workload's shared prompts and its request generator.
pub struct Prompts {
    pub workload: Workload,
    shared: Vec<String>,
}

impl Prompts {
    pub fn new(workload: Workload) -> Self {
        let shared = (0..workload.shared_prompts)
            .map(|i| {
                let mut s = String::with_capacity(workload.shared_bytes);
                Rng::new(0x5EED_0000 + i as u64).fill_text(&mut s, workload.shared_bytes);
                s
            })
            .collect();
        Prompts { workload, shared }
    }

    /// Request `k` with shared prefix `shared` into `out` (cleared first).
    pub fn request_into(&self, out: &mut String, k: usize, shared: usize) {
        out.clear();
        out.push_str(&self.shared[shared % self.shared.len()]);
        Rng::new(0x00C0_FFEE_0000_0000 + k as u64).fill_text(out, self.workload.suffix_bytes);
    }

    /// Warm request `k`: (prompt, endpoint).
    pub fn warm_request(&self, k: usize) -> (String, usize) {
        let mut s = String::with_capacity(self.workload.shared_bytes + self.workload.suffix_bytes);
        self.request_into(&mut s, k, k % self.workload.shared_prompts);
        (s, self.warm_endpoint(k))
    }

    /// The endpoint warm request `k` went to.
    pub fn warm_endpoint(&self, k: usize) -> usize {
        Rng::new(0xE0_0000 + k as u64).below(self.workload.endpoints)
    }

    /// `n` new requests (never warmed) whose shared prefix is indexed.
    pub fn new_requests(&self, n: usize) -> Vec<String> {
        let mut rng = Rng::new(0xBEEF);
        (0..n)
            .map(|i| {
                let mut s = String::new();
                let shared = rng.below(self.workload.shared_prompts);
                self.request_into(&mut s, 1_000_000_000 + i, shared);
                s
            })
            .collect()
    }

    /// `n` new and `n` replayed requests as prompts: the two lookup query sets.
    pub fn query_prompts(
        &self,
        n: usize,
    ) -> (
        Vec<shepherd_scheduler_core::request::Prompt>,
        Vec<shepherd_scheduler_core::request::Prompt>,
    ) {
        use shepherd_scheduler_core::request::Prompt;
        let new = self.new_requests(n).into_iter().map(Prompt::Text).collect();
        let replayed = self
            .replayed_requests(n)
            .into_iter()
            .map(Prompt::Text)
            .collect();
        (new, replayed)
    }

    /// `n` warm requests replayed exactly.
    pub fn replayed_requests(&self, n: usize) -> Vec<String> {
        let mut rng = Rng::new(0xFACE);
        (0..n)
            .map(|_| self.warm_request(rng.below(self.workload.warm_requests)).0)
            .collect()
    }
}
