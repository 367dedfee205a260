//! The cache-aware policy's approximate prefix tree: one radix tree over the text of every
//! request routed, each node marked with the workers ("tenants") it was routed to and when
//! each last used it, as `sgl-model-gateway/src/policies/tree.rs` (sglang-router 0.3.2) keeps
//! it.
//!
//! - [`Tree::insert`] adds a routed prompt for its worker, splitting edges as needed; a
//!   worker's size is the number of symbols on the nodes it is marked on.
//! - [`Tree::prefix_match`] walks the longest prefix of a prompt present in the tree (over all
//!   workers), stops inside an edge at the first differing symbol, and returns that length and
//!   one worker marked on the node reached — upstream takes the first key of that node's hash
//!   map, an arbitrary but stable order; here the worker of lowest `rank(node salt, worker)`.
//!   The walk refreshes that worker's last use up to the root.
//! - [`Tree::evict_tenant_by_size`] removes, for each worker over the limit, its least recently
//!   used leaves (nodes where it is marked and none of whose children are) until it fits; a
//!   node no worker is marked on any more leaves the tree.
//!
//! Symbols are the prompt's characters upstream; the simulator's prompts are token ids, and a
//! token stands for the characters it decodes to (see `prompt_symbols`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use ahash::AHashMap;
use shepherd_scheduler_core::endpoint::EndpointId;

type NodeId = u32;
const ROOT: NodeId = 0;

#[derive(Debug, Default)]
struct Node {
    edge: Vec<u32>,
    children: AHashMap<u32, NodeId>,
    parent: NodeId,
    /// Worker → last use (ns).
    tenants: Vec<(EndpointId, u64)>,
    /// Fixes this node's order among its tenants.
    salt: u64,
    alive: bool,
}

impl Node {
    fn has(&self, t: EndpointId) -> bool {
        self.tenants.iter().any(|(id, _)| *id == t)
    }

    fn last_use(&self, t: EndpointId) -> Option<u64> {
        self.tenants
            .iter()
            .find(|(id, _)| *id == t)
            .map(|(_, ts)| *ts)
    }

    /// Marks `t` as using the node at `now`; whether it was newly marked.
    fn touch(&mut self, t: EndpointId, now: u64) -> bool {
        match self.tenants.iter_mut().find(|(id, _)| *id == t) {
            Some(entry) => {
                entry.1 = now;
                false
            }
            None => {
                self.tenants.push((t, now));
                true
            }
        }
    }
}

/// A multi-tenant radix tree. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct Tree {
    nodes: Vec<Node>,
    free: Vec<NodeId>,
    sizes: AHashMap<EndpointId, usize>,
    next_salt: u64,
}

impl Default for Tree {
    fn default() -> Self {
        Tree {
            nodes: vec![Node {
                alive: true,
                ..Node::default()
            }],
            free: Vec::new(),
            sizes: AHashMap::new(),
            next_salt: 1,
        }
    }
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Tree {
    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.nodes[id as usize]
    }

    fn alloc(&mut self, edge: Vec<u32>, parent: NodeId, tenants: Vec<(EndpointId, u64)>) -> NodeId {
        self.next_salt += 1;
        let node = Node {
            edge,
            children: AHashMap::new(),
            parent,
            tenants,
            salt: self.next_salt,
            alive: true,
        };
        match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as NodeId
            }
        }
    }

    fn grow(&mut self, t: EndpointId, by: usize) {
        *self.sizes.entry(t).or_default() += by;
    }

    /// Symbols on the nodes `t` is marked on.
    pub(crate) fn tenant_size(&self, t: EndpointId) -> usize {
        self.sizes.get(&t).copied().unwrap_or(0)
    }

    /// Records that `text` was routed to `tenant` at `now`.
    pub(crate) fn insert(&mut self, text: &[u32], tenant: EndpointId, now: u64) {
        self.node_mut(ROOT).touch(tenant, now);
        self.sizes.entry(tenant).or_default();
        let mut cur = ROOT;
        let mut idx = 0;
        while idx < text.len() {
            let first = text[idx];
            let Some(&child) = self.node(cur).children.get(&first) else {
                let rest = text[idx..].to_vec();
                let n = rest.len();
                let new = self.alloc(rest, cur, vec![(tenant, now)]);
                self.node_mut(cur).children.insert(first, new);
                self.grow(tenant, n);
                return;
            };
            let edge_len = self.node(child).edge.len();
            let shared = common_prefix(&self.node(child).edge, &text[idx..]);
            if shared < edge_len {
                // Split: cur → mid (the shared part) → child (the rest of its edge).
                let tail = self.node_mut(child).edge.split_off(shared);
                let head = std::mem::replace(&mut self.node_mut(child).edge, tail);
                let tenants = self.node(child).tenants.clone();
                let mid = self.alloc(head, cur, tenants);
                let tail_first = self.node(child).edge[0];
                self.node_mut(mid).children.insert(tail_first, child);
                self.node_mut(child).parent = mid;
                self.node_mut(cur).children.insert(first, mid);
                if self.node_mut(mid).touch(tenant, now) {
                    self.grow(tenant, shared);
                }
                cur = mid;
            } else {
                if self.node_mut(child).touch(tenant, now) {
                    self.grow(tenant, edge_len);
                }
                cur = child;
            }
            idx += shared;
        }
    }

    /// The longest prefix of `text` in the tree (in symbols) and a tenant holding it, whose
    /// last use is refreshed to `now`; `rank(salt, tenant)` orders a node's tenants.
    pub(crate) fn prefix_match(
        &mut self,
        text: &[u32],
        now: u64,
        rank: impl Fn(u64, EndpointId) -> u64,
    ) -> (usize, Option<EndpointId>) {
        let mut cur = ROOT;
        let mut idx = 0;
        while idx < text.len() {
            let Some(&child) = self.node(cur).children.get(&text[idx]) else {
                break;
            };
            let node = self.node(child);
            let shared = common_prefix(&node.edge, &text[idx..]);
            let partial = shared < node.edge.len();
            idx += shared;
            cur = child;
            if partial {
                break;
            }
        }
        let node = self.node(cur);
        let tenant = node
            .tenants
            .iter()
            .map(|(t, _)| *t)
            .min_by_key(|t| (rank(node.salt, *t), *t));
        if let Some(t) = tenant {
            let mut at = cur;
            loop {
                self.node_mut(at).touch(t, now);
                if at == ROOT {
                    break;
                }
                at = self.node(at).parent;
            }
        }
        (idx, tenant)
    }

    /// The longest prefix of `text` in the tree (in symbols) and up to `cap` tenants of the
    /// node that match reaches, ordered by `rank(salt, tenant)` (none for an empty match).
    /// Nothing is refreshed: the insert of the routed prompt refreshes its worker's path.
    /// This is how SGLang Model Gateway 1.13 reads the tree (`matched_tenants`: every holder
    /// of the deepest matched node, at most 8, in the node's map order).
    pub(crate) fn prefix_match_holders(
        &self,
        text: &[u32],
        cap: usize,
        rank: impl Fn(u64, EndpointId) -> u64,
    ) -> (usize, Vec<EndpointId>) {
        let mut cur = ROOT;
        let mut idx = 0;
        while idx < text.len() {
            let Some(&child) = self.node(cur).children.get(&text[idx]) else {
                break;
            };
            let node = self.node(child);
            let shared = common_prefix(&node.edge, &text[idx..]);
            idx += shared;
            cur = child;
            if shared < node.edge.len() {
                break;
            }
        }
        if idx == 0 {
            return (0, Vec::new());
        }
        let node = self.node(cur);
        let mut holders: Vec<EndpointId> = node.tenants.iter().map(|(t, _)| *t).collect();
        holders.sort_by_key(|t| (rank(node.salt, *t), *t));
        holders.truncate(cap);
        (idx, holders)
    }

    /// Symbols over every tenant (a symbol two tenants hold counts twice).
    pub(crate) fn total_size(&self) -> usize {
        self.sizes.values().sum()
    }

    /// Evicts least recently used leaves, across all tenants, until the tree-wide total
    /// ([`Tree::total_size`]) is at most `max_size` (the shared budget of SGLang Model
    /// Gateway 1.13).
    pub(crate) fn evict_total_by_size(&mut self, max_size: usize) {
        if self.total_size() <= max_size {
            return;
        }
        let mut heap = BinaryHeap::new();
        for id in 1..self.nodes.len() as NodeId {
            if !self.node(id).alive {
                continue;
            }
            let tenants: Vec<(EndpointId, u64)> = self.node(id).tenants.clone();
            for (t, ts) in tenants {
                if self.is_leaf_for(id, t) {
                    heap.push(Reverse((ts, id, t)));
                }
            }
        }
        while self.total_size() > max_size {
            let Some(Reverse((_, id, t))) = heap.pop() else {
                break;
            };
            if !self.node(id).alive || !self.node(id).has(t) {
                continue;
            }
            let parent = self.remove_tenant_leaf(id, t);
            if parent != ROOT
                && self.is_leaf_for(parent, t)
                && let Some(ts) = self.node(parent).last_use(t)
            {
                heap.push(Reverse((ts, parent, t)));
            }
        }
    }

    /// Unmarks `t` on leaf `id` (freeing the node when nobody is left on it); returns its
    /// parent.
    fn remove_tenant_leaf(&mut self, id: NodeId, t: EndpointId) -> NodeId {
        let len = self.node(id).edge.len();
        if let Some(size) = self.sizes.get_mut(&t) {
            *size = size.saturating_sub(len);
        }
        self.node_mut(id).tenants.retain(|(x, _)| *x != t);
        let parent = self.node(id).parent;
        let node = self.node(id);
        if node.children.is_empty() && node.tenants.is_empty() {
            let first = node.edge.first().copied();
            if let Some(first) = first {
                self.node_mut(parent).children.remove(&first);
            }
            let dead = self.node_mut(id);
            dead.alive = false;
            dead.edge = Vec::new();
            self.free.push(id);
        }
        parent
    }

    fn is_leaf_for(&self, id: NodeId, t: EndpointId) -> bool {
        let node = self.node(id);
        node.alive && node.has(t) && !node.children.values().any(|c| self.node(*c).has(t))
    }

    /// Evicts, for every tenant holding more than `max_size` symbols, its least recently used
    /// leaves until it holds at most `max_size`.
    pub(crate) fn evict_tenant_by_size(&mut self, max_size: usize) {
        let over: Vec<EndpointId> = self
            .sizes
            .iter()
            .filter(|(_, s)| **s > max_size)
            .map(|(t, _)| *t)
            .collect();
        if over.is_empty() {
            return;
        }
        let mut heap = BinaryHeap::new();
        for id in 1..self.nodes.len() as NodeId {
            for &t in &over {
                if self.is_leaf_for(id, t)
                    && let Some(ts) = self.node(id).last_use(t)
                {
                    heap.push(Reverse((ts, id, t)));
                }
            }
        }
        while let Some(Reverse((_, id, t))) = heap.pop() {
            if self.tenant_size(t) <= max_size || !self.node(id).alive || !self.node(id).has(t) {
                continue;
            }
            let parent = self.remove_tenant_leaf(id, t);
            if parent != ROOT
                && self.is_leaf_for(parent, t)
                && let Some(ts) = self.node(parent).last_use(t)
            {
                heap.push(Reverse((ts, parent, t)));
            }
        }
    }
}
