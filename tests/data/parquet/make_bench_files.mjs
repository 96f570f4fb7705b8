// Writes the files bench/dataset_read.cpp reads: 100,000 NuminaMath-like rows
// (problem, solution, a two-turn `messages` list) as JSONL, as Parquet from DuckDB
// (snappy and zstd, its defaults otherwise) and as CSV.
//
//   cd tests/data/parquet && npm install && node make_bench_files.mjs /tmp/grpo_bench_data
import { mkdirSync, createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { DuckDBInstance } from '@duckdb/node-api';

const out = process.argv[2] ?? '/tmp/grpo_bench_data';
const rows = Number(process.argv[3] ?? 100000);
mkdirSync(out, { recursive: true });

const text = (i, words) => Array.from({ length: words }, (_, k) => `w${(i * 31 + k * 7) % 1000}`).join(' ');
const file = createWriteStream(`${out}/rows.jsonl`);
for (let i = 0; i < rows; ++i) {
  const problem = `Problem ${i}: ${text(i, 30)} What is ${i} + ${2 * i}?`;
  const solution = `${text(i + 1, 80)} The answer is $\\boxed{${3 * i}}$.`;
  const line = JSON.stringify({ problem, solution, messages: [{ role: 'user', content: problem }, { role: 'assistant', content: solution }] });
  if (!file.write(line + '\n')) await once(file, 'drain');
}
file.end();
await once(file, 'finish');

const db = await DuckDBInstance.create(':memory:');
const con = await db.connect();
await con.run(`CREATE TABLE t AS SELECT * FROM read_json('${out}/rows.jsonl', format = 'newline_delimited',
  columns = {problem: 'VARCHAR', solution: 'VARCHAR', messages: 'STRUCT(role VARCHAR, content VARCHAR)[]'})`);
await con.run(`COPY t TO '${out}/rows_snappy.parquet' (FORMAT parquet, COMPRESSION snappy)`);
await con.run(`COPY t TO '${out}/rows_zstd.parquet' (FORMAT parquet, COMPRESSION zstd)`);
await con.run(`COPY (SELECT problem, solution FROM t) TO '${out}/rows.csv' (FORMAT csv)`);
await con.run(`COPY (SELECT problem, solution FROM t) TO '${out}/rows_flat.jsonl' (FORMAT json)`);
console.log(`wrote ${rows} rows to ${out}`);
