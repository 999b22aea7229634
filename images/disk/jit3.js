// jit3.js [seconds [late]]: three JS functions doing 10, 30 and 60 units
// of identical integer work per round (the known split), JIT-compiled by
// V8; after `late` seconds (default a third of the run) a fourth one,
// lateD, is compiled from source and runs too, so its perf-map entry
// appears only after the session started.  Run by the disk-guest-jit test
// as: node --perf-basic-prof --no-turbo-inlining jit3.js SECONDS
// (no inlining: each function keeps its own code, as a profile of real
// code would show it).  Prints OPVM-TRUTH lines like the test image's
// workloads.
'use strict';
const secs = Number(process.argv[2] || 20);
const lateAt = Number(process.argv[3] || secs / 3);
let sink = 1;

function jitA(n) {
	let x = sink;
	for (let u = 0; u < n; u++)
		for (let i = 0; i < 2000; i++)
			x = (Math.imul(x, 1103515245) + i) | 0;
	sink = x;
}
function jitB(n) {
	let x = sink;
	for (let u = 0; u < n; u++)
		for (let i = 0; i < 2000; i++)
			x = (Math.imul(x, 1103515245) + i) | 0;
	sink = x;
}
function jitC(n) {
	let x = sink;
	for (let u = 0; u < n; u++)
		for (let i = 0; i < 2000; i++)
			x = (Math.imul(x, 1103515245) + i) | 0;
	sink = x;
}

const t0 = Date.now();
let late = null, rounds = 0;
console.log(`OPVM-TRUTH jit3 pid=${process.pid} seconds=${secs} late=${lateAt}`);
while (Date.now() - t0 < secs * 1000) {
	jitA(10);
	jitB(30);
	jitC(60);
	if (late)
		late(10);
	else if (Date.now() - t0 >= lateAt * 1000) {
		late = eval('(function lateD(n) { let x = sink; for (let u = 0; u < n; u++) ' +
			    'for (let i = 0; i < 2000; i++) x = (Math.imul(x, 1103515245) + i) | 0; ' +
			    'sink = x; })');
		console.log(`OPVM-TRUTH jit3 late at round ${rounds}`);
	}
	rounds++;
}
console.log(`OPVM-TRUTH jit3 done rounds=${rounds} sink=${sink}`);
