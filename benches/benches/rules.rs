//! Rules per call: one decision of a `publish_post` call against a 100-rule file (20 tools,
//! three rules that apply to every tool), against canonicalizing the same arguments in the same
//! run — the work every gated call already does before a rule sees it. Target: the decision at
//! most 5× the canonicalization.

use std::hint::black_box;

use countersign_canon::{Limits, Profile, canonicalize};
use countersign_gate::policy::rules::Ruling;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "support/fixtures.rs"]
mod fixtures;
#[path = "support/rules.rs"]
mod rules;
use fixtures::tool_arguments;
use rules::{Decision, RULE_COUNT};

fn bench(c: &mut Criterion) {
    let args = tool_arguments();
    let rules = rules::rules();
    let decision = Decision::publish_post(&args);
    let ruling = rules.decide(&decision.call());
    assert!(matches!(ruling, Ruling::Run { .. }), "{ruling:?}");
    let mut group = c.benchmark_group(format!("rules/decision_{RULE_COUNT}_rules"));
    group.throughput(Throughput::Elements(1));
    group.bench_function("baseline_canonicalize", |b| {
        b.iter(|| {
            canonicalize(black_box(&args), Profile::CountersignV1, &Limits::DEFAULT)
                .expect("valid arguments")
        });
    });
    group.bench_function("rules_decide", |b| {
        b.iter(|| rules.decide(black_box(&decision.call())));
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
