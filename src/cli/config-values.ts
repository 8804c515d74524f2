// Flag values -> numbers: counts, ports and memory sizes, each refused with a ConfigError that
// names the flag. Pure functions of strings; they must never read argv or the environment.
import { ConfigError } from '../core/index.js';

/** A whole number in [min, max], written in decimal digits only (no signs, exponents or spaces). */
export function parseCount(value: string, flag: string, min = 1, max = Number.MAX_SAFE_INTEGER): number {
  if (!/^\d+$/.test(value)) throw new ConfigError(`${flag} must be a whole number, got "${value}"`);
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new ConfigError(`${flag} must be between ${min} and ${max}, got ${value}`);
  }
  return n;
}

const UNITS: Readonly<Record<string, number>> = {
  '': 1,
  b: 1,
  k: 1e3,
  kb: 1e3,
  m: 1e6,
  mb: 1e6,
  g: 1e9,
  gb: 1e9,
  t: 1e12,
  tb: 1e12,
  ki: 1024,
  kib: 1024,
  mi: 1024 ** 2,
  mib: 1024 ** 2,
  gi: 1024 ** 3,
  gib: 1024 ** 3,
  ti: 1024 ** 4,
  tib: 1024 ** 4,
};

/**
 * A memory size: a number and an optional unit, `512MiB`, `1.5GiB`, `2GB`, `1073741824`.
 * Decimal units (kB, MB, GB) are powers of 1000, binary ones (KiB, MiB, GiB) of 1024.
 */
export function parseSize(value: string, flag: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(value);
  const unit = UNITS[(match?.[2] ?? '').toLowerCase()];
  if (match === null || unit === undefined) {
    throw new ConfigError(`${flag} must be a size such as 512MiB, 2GiB or 1073741824 (bytes), got "${value}"`);
  }
  const bytes = Math.floor(Number(match[1]) * unit);
  if (!Number.isSafeInteger(bytes) || bytes < 1)
    throw new ConfigError(`${flag} must be at least 1 byte, got "${value}"`);
  return bytes;
}

/** 1536 -> "1.5 KiB"; exact bytes below 1 KiB. */
export function formatBytes(bytes: number): string {
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  if (bytes < 1024) return `${bytes} B`;
  let value = bytes;
  let unit = 'B';
  for (const next of units) {
    if (value < 1024) break;
    value /= 1024;
    unit = next;
  }
  return `${Number(value.toFixed(2))} ${unit}`;
}

/** The smallest whole number of MiB holding `bytes`, as a flag value ("97MiB"). */
export function mibAtLeast(bytes: number): string {
  return `${Math.ceil(bytes / 1024 ** 2)}MiB`;
}

/** 1234567 -> "1,234,567". */
export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}
