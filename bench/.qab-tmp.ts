// temporary A/B microbench (helper scratch; deleted after use)
import { quantizeChannels, quantizeRows } from '../compiler/quant/pack.ts';
import { setThreads } from '../runtime/native.ts';
import { callProgram, type Call, type Operand } from './reference/call-program.ts';
function values(n: number, seed: number, scale: number): Float32Array {
  let s = seed;
  return Float32Array.from({ length: n }, () => { s = (s * 1664525 + 1013904223) % 4294967296; return (s / 4294967296 * 2 - 1) * scale; });
}
function timeCalls(calls: Call[], rounds: number) {
  const prog = callProgram(calls);
  for (let i = 0; i < 3; i++) prog.run();
  const t: number[] = [];
  for (let i = 0; i < rounds; i++) { const t0 = process.hrtime.bigint(); prog.run(); t.push(Number(process.hrtime.bigint() - t0) / 1e3 / calls.length); }
  prog.free(); t.sort((a, b) => a - b);
  return `${t[0]!.toFixed(0)}/${t[Math.floor(t.length / 2)]!.toFixed(0)}`;
}
const out = (dims: number[]): Operand => ({ role: 'out', dtype: 'float32', dims, data: new Float32Array(dims.reduce((a, b) => a * b, 1)) });
const which = process.argv[2] ?? '';
if (process.env.QT1) setThreads(1);
const res: string[] = [];
for (const [m, k, n] of process.env.QPT ? [] :  [[32, 512, 512], [32, 512, 2048], [32, 2048, 512], [1024, 512, 512], [1024, 512, 2048]]) {
  const a: Operand = { role: 'feed', dtype: 'float32', dims: [m, k], data: values(m * k, 1, 1) };
  const pk = quantizeChannels(values(k * n, 2, 0.1), k, n, 8);
  const reps = m > 100 ? 4 : 16;
  for (const input of [0, 1]) {
    const calls: Call[] = Array.from({ length: reps }, () => ({ kernel: 'qmatmul', variant: 'auto', ins: [a, { role: 'weight', dtype: 'int8', dims: pk.dims, data: pk.q }, { role: 'weight', dtype: 'float32', dims: [n], data: pk.scale }, { role: 'weight', dtype: 'int32', dims: [n], data: pk.sum }, null, null], outs: [out([m, n])], iargs: [0, input, n, k] }));
    res.push(`qmm${input ? 'w8' : 'i8'} ${m}x${k}x${n} ${timeCalls(calls, 15)}`);
  }
}
{
  const v = 58101, d = 512, m = 32, kk = 8;
  const x: Operand = { role: 'feed', dtype: 'float32', dims: [m, d], data: values(m * d, 3, 1) };
  const q = quantizeRows(values(v * d, 4, 0.1), v, d);
  for (const input of [0, 1]) {
    const calls: Call[] = Array.from({ length: 2 }, () => ({ kernel: 'qproject_topk', variant: 'auto', ins: [x, { role: 'weight', dtype: 'int8', dims: q.dims, data: q.q }, { role: 'weight', dtype: 'float32', dims: [v], data: q.scale }, { role: 'weight', dtype: 'int32', dims: [v], data: q.sum }, null, null], outs: [out([m, kk]), { role: 'out', dtype: 'int64', dims: [m, kk], data: new BigInt64Array(m * kk) } as Operand], iargs: [kk, input, d] }));
    res.push(`qpt${input ? 'w8' : 'i8'} 32 ${timeCalls(calls, 9)}`);
  }
}
console.log(which.padEnd(4), res.join(' | '));
