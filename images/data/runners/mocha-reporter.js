// repogym's mocha reporter: a JSON file of every test's result (REPOGYM_RESULTS) and one TAP
// line per test on stdout, two sources the grader cross-checks. It requires nothing from the
// repository (mocha hands it the runner), so it works with whatever mocha the project has.
'use strict';
const fs = require('fs');
const path = require('path');

function titles(test) {
  const out = [];
  for (let node = test; node; node = node.parent) {
    if (node.title) out.unshift(node.title);
  }
  return out;
}

function RepogymReporter(runner) {
  const results = [];
  let n = 0;
  const file = process.env.REPOGYM_RESULTS || '/opt/repogym-grade/out/mocha.json';
  const root = process.env.REPOGYM_ROOT || process.cwd();
  const record = (test, status) => {
    const rel = test.file ? path.relative(root, test.file) : '';
    const id = [rel, ...titles(test)].join(' > ');
    n += 1;
    results.push({ id, status });
    process.stdout.write(`${status === 'PASSED' ? 'ok' : 'not ok'} ${n} ${id}\n`);
  };
  runner.on('pass', (test) => record(test, 'PASSED'));
  runner.on('fail', (test, err) => {
    // a failing hook fails the tests it would have run: name the hook's test when there is one
    const target = test.type === 'hook' && test.ctx && test.ctx.currentTest ? test.ctx.currentTest : test;
    record(target, 'FAILED');
    process.stdout.write(`# ${String((err && err.message) || err).split('\n')[0]}\n`);
  });
  runner.on('pending', (test) => {
    results.push({ id: [test.file ? path.relative(root, test.file) : '', ...titles(test)].join(' > '), status: 'SKIPPED' });
  });
  runner.once('end', () => {
    fs.writeFileSync(file, JSON.stringify({ results }));
  });
}

module.exports = RepogymReporter;
