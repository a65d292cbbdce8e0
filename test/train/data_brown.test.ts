/** The built-in Brown Corpus: tags stripped, text rebuilt as printed, a fixed train/validation split. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { brownCorpus, brownDocuments, detokenizeBrown, isBrownValidation } from '../../src/train/data/brown.ts';

// Tagged lines copied from the corpus files (ca01, ca02, ce01, ce07, cp11, cp24, cj33, ck01) and the text each must give.
const cases: [tagged: string, text: string][] = [
  [
    "\n\n\tThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr an/at investigation/nn of/in Atlanta's/np$ recent/jj primary/nn election/nn produced/vbd ``/`` no/at evidence/nn ''/'' that/cs any/dti irregularities/nns took/vbd place/nn ./.\n",
    'The Fulton County Grand Jury said Friday an investigation of Atlanta\'s recent primary election produced "no evidence" that any irregularities took place.',
  ],
  [
    // `'' ,` and `'' .` go back inside the quote
    "\n\n\t``/`` Only/rb a/at relative/jj handful/nn of/in such/jj reports/nns was/bedz received/vbn ''/'' ,/, the/at jury/nn said/vbd ,/, ``/`` considering/in the/at widespread/jj interest/nn in/in the/at election/nn ''/'' ./.\n",
    '"Only a relative handful of such reports was received," the jury said, "considering the widespread interest in the election."',
  ],
  [
    // the abbreviation's own period ends the sentence: `Jr. .` → `Jr.`
    '\tThe/at primary/nn which/wdt was/bedz won/vbn by/in Mayor-nominate/nn-tl Ivan/np Allen/np Jr./np ./.\n',
    'The primary which was won by Mayor-nominate Ivan Allen Jr.',
  ],
  [
    // a lone ' opens, then closes, a single quote
    "\t``/`` We're/ppss+ber getting/vbg more/ap '/' pro/jj '/' letters/nns than/in '/' con/jj '/' on/in horse/nn race/nn betting/nn ''/'' ,/, said/vbd Ratcliff/np ./.\n",
    '"We\'re getting more \'pro\' letters than \'con\' on horse race betting," said Ratcliff.',
  ],
  [
    '\tDallas/np may/md get/vb to/to hear/vb a/at debate/nn between/in Reps./nns-tl V./np E./np (/( Red/np )/) Berry/np and/cc Joe/np Ratcliff/np ./.\n',
    'Dallas may get to hear a debate between Reps. V. E. (Red) Berry and Joe Ratcliff.',
  ],
  [
    // every ? ! ; is written twice; sentences of one paragraph share a line
    "\n\n\n\t``/`` Third/od !/. !/.\nThird/od base/nn ''/'' !/. !/.\nEddie/np shouted/vbd ./.\n``/`` What/wdt do/do you/ppss mean/vb ''/'' ?/. ?/.\n",
    '"Third! Third base!" Eddie shouted. "What do you mean?"',
  ],
  [
    '\tthe/at trouble/nn centers/vbz in/in the/at breaking/vbg ;/. ;/. but/cc dominant/jj stress/nn will/md be/be assigned/vbn to/in broken/vbn ./.\n',
    'the trouble centers in the breaking; but dominant stress will be assigned to broken.',
  ],
  [
    // an inch mark becomes " and the stray '' after it goes (ce01, ce07)
    "\tHenri/np was/bedz only/rb 4'/nns 10''/nns ''/'' tall/jj ,/, with/in bars/nns 1/8''/nn ''/'' thick/jj ./.\n",
    'Henri was only 4\' 10" tall, with bars 1/8" thick.',
  ],
  [
    // a headline (-hl tags) gets a line of its own; paragraphs are separated by a blank line
    '\n\n\nThirty-three/cd-hl \nScotty/np did/dod not/* go/vb back/rb to/in school/nn ./.\n\n\n\tTeachers/nns --/-- men/nns who/wps wore/vbd brown/jj suits/nns --/-- came/vbd ./.\n',
    'Thirty-three\nScotty did not go back to school.\n\nTeachers -- men who wore brown suits -- came.',
  ],
];

test('detokenizeBrown rebuilds printed text from tagged Brown lines', () => {
  for (const [tagged, text] of cases) assert.equal(detokenizeBrown(tagged), text);
});

test('brownDocuments: 500 documents, tags gone, real passages read as printed', () => {
  const docs = brownDocuments();
  assert.equal(docs.length, 500);
  assert.equal(docs[0].id, 'ca01');
  assert.equal(docs[499].id, 'cr09');
  assert.equal(new Set(docs.map((d) => d.genre)).size, 15);
  for (const d of docs) {
    assert.ok(d.text.length > 5000, `${d.id} has ${d.text.length} characters`);
    assert.doesNotMatch(d.text, /[a-z]\/(?:at|nn|nns|np|vbd|jj|cc|in-tl|nn-tl)\b|``|''|\t/, `${d.id} still holds a tag, a Brown quote or a tab`);
    assert.doesNotMatch(d.text, / [,.;:?!)]( |$)|\( /, `${d.id} has a space on the wrong side of punctuation`);
  }
  const text = (id: string) => docs.find((d) => d.id === id)!.text;
  assert.ok(text('ca01').startsWith(cases[0][1] + '\n\nThe jury further said in term-end presentments that the City Executive Committee, which had over-all charge of the election, "deserves the praise and thanks of the City of Atlanta" for the manner in which the election was conducted.\n\n'));
  assert.ok(text('ca01').includes('\n\nWards protected\nThe jury said it found the court "has incorporated into its operating procedures the recommendations" of two previous grand juries'));
  assert.ok(text('ca02').includes('\n\n"We\'re getting more \'pro\' letters than \'con\' on horse race betting," said Ratcliff. "But I believe'));
  assert.ok(text('cp24').includes(' "Third! Third base!" Eddie shouted. Phil spun around'));
  assert.ok(text('cp11').includes('\n\n"What do you mean?" She frowned.\n\n"Why put such a high value on being top dog?" I added.'));
});

test('brownCorpus: every 20th document is validation; the split is fixed and disjoint', () => {
  const { train, validation } = brownCorpus();
  assert.equal(train.length, 475);
  assert.equal(validation.length, 25);
  assert.equal(brownCorpus(), brownCorpus(), 'cached: the same object on every call');
  const docs = brownDocuments();
  assert.deepEqual(validation, docs.filter((_, i) => i % 20 === 19).map((d) => d.text));
  assert.deepEqual(train, docs.filter((_, i) => i % 20 !== 19).map((d) => d.text));
  assert.deepEqual(docs.filter((_, i) => isBrownValidation(i)).map((d) => d.id).slice(0, 3), ['ca20', 'ca40', 'cb16']);
  const trainSet = new Set(train);
  assert.ok(validation.every((v) => !trainSet.has(v)), 'no validation document is also a training document');
  assert.equal(new Set(validation.map((_, i) => docs[i * 20 + 19].genre)).size >= 10, true, 'validation spans the genres');
});
