// A model-free sampler for grammars: a character vocabulary (printable ASCII, control characters,
// a few non-ASCII characters and multi-character pieces such as "1r5") and a random walk that
// picks uniformly among the tokens the grammar's mask allows. What the walk can write is what
// any model could be made to write under the same mask, so a walk that ends with the stop token
// and fails validation is a grammar bug, whatever the model.
import { compileSchema, loadXgrammar, type XgrammarModule } from '../../src/grammar/index.js';

type Compiler = Awaited<ReturnType<XgrammarModule['GrammarCompiler']['createGrammarCompiler']>>;

export interface Walk {
  readonly text: string;
  /** The walk chose the stop token (the grammar said the output was complete). */
  readonly complete: boolean;
}

export interface Walker {
  /** Up to `numWalks` walks over the schema (as the API hands it to xgrammar), each up to `maxTokens`. */
  walks(schema: string, numWalks: number, random: () => number, maxTokens?: number): Promise<Walk[]>;
  readonly xg: XgrammarModule;
}

const PIECES = [
  ...Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)),
  '\t',
  '\n',
  '\u0001',
  'é',
  '\u2028',
  '1r5',
  '0 5',
  '"x',
  '00',
  '.5',
  '</s>',
];

export async function grammarWalker(): Promise<Walker> {
  const xg = loadXgrammar();
  const stop = PIECES.length - 1;
  const info = await xg.TokenizerInfo.createTokenizerInfo(PIECES, 'raw', false, PIECES.length, [stop]);
  const compiler: Compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
  return {
    xg,
    async walks(schema, numWalks, random, maxTokens = 400) {
      const compiled = await compileSchema(xg, compiler, schema, true);
      const out: Walk[] = [];
      try {
        for (let w = 0; w < numWalks; w++) {
          const matcher = await xg.GrammarMatcher.createGrammarMatcher(compiled, [stop]);
          let text = '';
          let complete = false;
          try {
            for (let step = 0; step < maxTokens && !complete; step++) {
              const mask = await matcher.getNextTokenBitmask();
              const allowed: number[] = [];
              for (let id = 0; id < PIECES.length; id++)
                if (((mask[id >> 5] as number) >>> (id & 31)) & 1) allowed.push(id);
              if (allowed.length === 0) break;
              // Stop when allowed, half the time (so walks end; uniform steps explore the rest).
              const id =
                allowed.includes(stop) && random() < 0.5
                  ? stop
                  : (allowed[Math.floor(random() * allowed.length)] as number);
              if (!matcher.acceptToken(id)) throw new Error(`the matcher refused token ${id} that its mask allowed`);
              if (id === stop) complete = true;
              else text += PIECES[id];
            }
          } finally {
            matcher.dispose();
          }
          out.push({ text, complete });
        }
      } finally {
        compiled.dispose();
      }
      return out;
    },
  };
}
