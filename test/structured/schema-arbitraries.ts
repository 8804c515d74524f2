// Random JSON schemas for the structured-output properties: objects of leaves that stress what
// xgrammar's own converter gets wrong (number bounds, integer and fractional, exclusive or not,
// multipleOf, string lengths, formats, patterns), nested in objects and arrays. Each schema is
// bounded (lengths, sizes, one level of nesting), so a well-formed answer fits a few hundred tokens.
import fc from 'fast-check';

export type Schema = Record<string, unknown>;

/** A bound: an integer, or a fraction with 1-3 decimals (e.g. 0.5, -1.25). */
const bound = fc.oneof(
  fc.integer({ min: -200, max: 200 }),
  fc.integer({ min: -20_000, max: 20_000 }).map((n) => n / 100),
  fc.integer({ min: -2000, max: 2000 }).map((n) => n / 1000),
);

/** Numbers and integers with any mix of inclusive and exclusive bounds (possibly one-sided). */
export const numberLeaf: fc.Arbitrary<Schema> = fc
  .record({
    type: fc.constantFrom('number', 'integer'),
    lo: bound,
    span: fc.oneof(
      fc.integer({ min: 1, max: 50 }),
      fc.integer({ min: 1, max: 300 }).map((n) => n / 100),
    ),
    lower: fc.constantFrom('minimum', 'exclusiveMinimum', null),
    upper: fc.constantFrom('maximum', 'exclusiveMaximum', null),
  })
  .map(({ type, lo, span, lower, upper }) => {
    const s: Schema = { type };
    if (lower !== null) s[lower] = lo;
    if (upper !== null) s[upper] = Math.round((lo + span) * 1000) / 1000;
    return s;
  });

export const multipleLeaf: fc.Arbitrary<Schema> = fc
  .record({
    type: fc.constantFrom('number', 'integer'),
    multipleOf: fc.constantFrom(0.5, 0.25, 0.1, 2, 3, 5),
    lo: fc.integer({ min: -20, max: 20 }),
    span: fc.integer({ min: 1, max: 30 }),
  })
  .map(({ type, multipleOf, lo, span }) => ({
    type: type === 'integer' && multipleOf < 1 ? 'number' : type,
    multipleOf,
    minimum: lo,
    maximum: lo + span,
  }));

export const stringLeaf: fc.Arbitrary<Schema> = fc.oneof(
  fc
    .tuple(fc.integer({ min: 0, max: 6 }), fc.integer({ min: 0, max: 12 }))
    .map(([min, extra]) => ({ type: 'string', minLength: min, maxLength: min + extra })),
  fc.integer({ min: 1, max: 12 }).map((maxLength) => ({ type: 'string', maxLength })),
  fc
    .constantFrom('date', 'date-time', 'time', 'email', 'hostname', 'ipv4', 'uuid', 'uri')
    .map((format) => ({ type: 'string', format })),
  fc
    .constantFrom(
      '^[a-z]{1,6}$',
      '^[A-Z][a-z]{0,5}$',
      '^[0-9]{2,4}$',
      '^(yes|no|maybe)$',
      '^.{1,8}$',
      '^[^a-z]{1,5}$',
      '^x.y$',
      '^\\w{2,5}$',
      '^[a-z]+-\\d{1,3}$',
    )
    .map((pattern) => ({ type: 'string', pattern })),
);

export const leaf: fc.Arbitrary<Schema> = fc.oneof(
  { arbitrary: numberLeaf, weight: 4 },
  { arbitrary: multipleLeaf, weight: 1 },
  { arbitrary: stringLeaf, weight: 3 },
  { arbitrary: fc.constant({ type: 'boolean' }), weight: 1 },
);

const key = fc.constantFrom('a', 'b', 'ratio', 'x', 'level', 'when', 'mail', 'id', 'score', 'code');

const objectOf = (value: fc.Arbitrary<Schema>): fc.Arbitrary<Schema> =>
  fc.uniqueArray(fc.tuple(key, value), { minLength: 1, maxLength: 3, selector: ([k]) => k }).chain((props) =>
    fc.subarray(props.map(([k]) => k)).map((required) => ({
      type: 'object',
      properties: Object.fromEntries(props),
      required,
      additionalProperties: false,
    })),
  );

/** An object of leaves, arrays of leaves (1-3 items) and one nested object level. */
export const schema: fc.Arbitrary<Schema> = objectOf(
  fc.oneof(
    { arbitrary: leaf, weight: 6 },
    {
      arbitrary: fc.record({ type: fc.constant('array'), items: leaf, maxItems: fc.integer({ min: 1, max: 3 }) }),
      weight: 1,
    },
    { arbitrary: objectOf(leaf), weight: 1 },
  ),
);
