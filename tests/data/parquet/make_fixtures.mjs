// Writes the Parquet (and CSV) fixtures of tests/data/dataset_files_test.cpp with
// two independent Parquet writers — DuckDB (@duckdb/node-api) and Apache Arrow's
// Rust implementation (parquet-wasm) — together with the rows each file holds as
// JSONL, written from the same JavaScript values, never read back from Parquet.
//
//   cd tests/data/parquet && npm install && node make_fixtures.mjs
import { writeFileSync, mkdirSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';
import { Field, List, Struct, Utf8, Int64, Int32, Float64, Bool, Table, vectorFromArray, tableToIPC } from 'apache-arrow';
import * as pq from 'parquet-wasm';

const WORDS = ['alpha', 'beta', 'gamma', 'delta'];

// Row i: every column type the reader supports, with nulls, empty lists and
// long and non-ASCII strings at fixed places.
function row(i) {
  const turns = i % 17 === 5 ? null : Array.from({ length: i % 4 }, (_, t) => ({
    role: t % 2 === 0 ? 'user' : 'assistant',
    content: t === 1 && i % 10 === 3 ? null : `turn ${t} of row ${i}`,
  }));
  return {
    id: i * 1000003 - 50000000,
    n: i % 7,
    score: i % 9 === 4 ? null : i / 8,
    ok: i % 11 === 2 ? null : i % 3 === 0,
    problem: i % 50 === 7 ? 'long '.repeat(120) + i : i % 5 === 1 ? `café ✓ 数学 "${i}" it's` : `What is ${i} + ${2 * i}?`,
    solution: i % 13 === 6 ? null : String(3 * i),
    tag: WORDS[i % 4],
    tags: i % 6 === 0 ? [] : [WORDS[i % 4], i % 8 === 1 ? null : WORDS[(i + 1) % 4]],
    meta: i % 19 === 3 ? null : { source: `s${i % 3}`, level: i % 5 },
    messages: turns,
  };
}

const sql = (v) => {
  if (v === null) return 'NULL';
  if (typeof v === 'string') return `'${v.replaceAll("'", "''")}'`;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[${v.map(sql).join(', ')}]`;
  return `{${Object.entries(v).map(([k, x]) => `'${k}': ${sql(x)}`).join(', ')}}`;
};

const DUCK_COLUMNS = `id BIGINT, n INTEGER, score DOUBLE, ok BOOLEAN, problem VARCHAR, solution VARCHAR, tag VARCHAR,
  tags VARCHAR[], meta STRUCT(source VARCHAR, level INTEGER), messages STRUCT(role VARCHAR, content VARCHAR)[]`;

function jsonl(rows) {
  return rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
}

async function duckdb(rows, files) {
  const db = await DuckDBInstance.create(':memory:');
  const con = await db.connect();
  await con.run(`CREATE TABLE t (${DUCK_COLUMNS})`);
  for (let at = 0; at < rows.length; at += 500) {
    const chunk = rows.slice(at, at + 500).map((r) => `(${Object.values(r).map(sql).join(', ')})`);
    await con.run(`INSERT INTO t VALUES ${chunk.join(',\n')}`);
  }
  for (const [file, options] of files) await con.run(`COPY t TO '${file}' (${options})`);
}

function arrowTable(rows) {
  const nullable = (name, type) => new Field(name, type, true);
  const turn = new Struct([nullable('role', new Utf8()), nullable('content', new Utf8())]);
  const column = (name, type, f = (x) => x) => vectorFromArray(rows.map((r) => (r[name] === null ? null : f(r[name]))), type);
  return new Table({
    id: column('id', new Int64(), BigInt),
    n: column('n', new Int32()),
    score: column('score', new Float64()),
    ok: column('ok', new Bool()),
    problem: column('problem', new Utf8()),
    solution: column('solution', new Utf8()),
    tags: column('tags', new List(nullable('item', new Utf8()))),
    messages: column('messages', new List(nullable('item', turn))),
  });
}

function arrowRows(rows) {
  return rows.map(({ id, n, score, ok, problem, solution, tags, messages }) => ({ id, n, score, ok, problem, solution, tags, messages }));
}

function parquetWasm(rows, file, configure) {
  const table = pq.Table.fromIPCStream(tableToIPC(arrowTable(rows), 'stream'));
  const props = configure(new pq.WriterPropertiesBuilder()).build();
  writeFileSync(file, pq.writeParquet(table, props));
}

mkdirSync('hub', { recursive: true });
const all = Array.from({ length: 3000 }, (_, i) => row(i));
// DuckDB: its default writer (dictionary pages, PLAIN fallback, data page v1) under each codec;
// its V2 format (data page v2, DELTA_BINARY_PACKED / DELTA_LENGTH_BYTE_ARRAY); row groups of 2048 rows (the writer rounds ROW_GROUP_SIZE 512 up to its vector batches).
await duckdb(all, [
  ['duckdb_snappy.parquet', 'FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE 512'],
  ['duckdb_gzip.parquet', 'FORMAT parquet, COMPRESSION gzip, ROW_GROUP_SIZE 512'],
  ['duckdb_zstd.parquet', 'FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 512'],
  ['duckdb_uncompressed.parquet', 'FORMAT parquet, COMPRESSION uncompressed, ROW_GROUP_SIZE 512'],
  ['duckdb_v2.parquet', 'FORMAT parquet, COMPRESSION zstd, PARQUET_VERSION V2, ROW_GROUP_SIZE 512'],
]);
writeFileSync('duckdb_rows.jsonl', jsonl(all));  // ids grow with the row index: insertion order is id order

// parquet-wasm (arrow-rs): dictionary off so values are PLAIN, small pages and row
// groups (many pages per chunk), data page v2 with DELTA encodings, each codec.
const some = all.slice(0, 700);
const small = (b) => b.setMaxRowGroupSize(256).setDataPageSizeLimit(2048);
parquetWasm(some, 'arrow_plain_snappy.parquet', (b) => small(b).setDictionaryEnabled(false).setCompression(pq.Compression.SNAPPY));
parquetWasm(some, 'arrow_dictionary_gzip.parquet', (b) => small(b).setDictionaryEnabled(true).setCompression(pq.Compression.GZIP));
parquetWasm(some, 'arrow_v2_delta_zstd.parquet', (b) =>
  small(b).setWriterVersion(pq.WriterVersion.V2).setDictionaryEnabled(false).setCompression(pq.Compression.ZSTD)
    .setColumnEncoding('id', pq.Encoding.DELTA_BINARY_PACKED).setColumnEncoding('n', pq.Encoding.DELTA_BINARY_PACKED)
    .setColumnEncoding('problem', pq.Encoding.DELTA_BYTE_ARRAY).setColumnEncoding('solution', pq.Encoding.DELTA_LENGTH_BYTE_ARRAY)
    .setColumnEncoding('score', pq.Encoding.BYTE_STREAM_SPLIT));
parquetWasm(some, 'arrow_v2_uncompressed.parquet', (b) => small(b).setWriterVersion(pq.WriterVersion.V2).setCompression(pq.Compression.UNCOMPRESSED));
writeFileSync('arrow_rows.jsonl', jsonl(arrowRows(some)));

// A hub dataset repository: arithmetic prompts in two train shards and a test shard,
// as `datasets` pushes them (data/<split>-NNNNN-of-NNNNN.parquet), and the same rows as CSV.
const arithmetic = (i) => ({ problem: `${i % 10} + ${(i * 7) % 10} =`, solution: String((i % 10) + ((i * 7) % 10)), id: i });
const shard = async (name, from, to) => {
  const db = await DuckDBInstance.create(':memory:');
  const con = await db.connect();
  const values = Array.from({ length: to - from }, (_, k) => arithmetic(from + k)).map((r) => `(${sql(r.problem)}, ${sql(r.solution)}, ${r.id})`);
  await con.run(`CREATE TABLE t AS SELECT * FROM (VALUES ${values.join(', ')}) v(problem, solution, id)`);
  await con.run(`COPY (SELECT * FROM t ORDER BY id) TO '${name}' (FORMAT ${name.endsWith('.csv') ? 'csv' : 'parquet'})`);
};
await shard('hub/train-00000-of-00002.parquet', 0, 40);
await shard('hub/train-00001-of-00002.parquet', 40, 80);
await shard('hub/test-00000-of-00001.parquet', 80, 100);
await shard('hub/train.csv', 0, 80);
writeFileSync('hub/rows.jsonl', jsonl(Array.from({ length: 100 }, (_, i) => arithmetic(i))));
