// Maps the hub's field paths (422 causes: spec.provider.workers[0].maximum, metadata.annotations[gardener.cloud/x])
// to lines of a YAML document, so errors show where they are.
import { isMap, isSeq, LineCounter, parseDocument, type Document } from "yaml";

/** segments splits a field path into keys and indexes. */
export function segments(field: string): (string | number)[] {
  const out: (string | number)[] = [];
  const re = /([^.[\]]+)|\[([^\]]*)\]/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(field))) {
    if (m[1] !== undefined) out.push(m[1]);
    else out.push(/^\d+$/.test(m[2]) ? Number(m[2]) : m[2]);
  }
  return out;
}

export interface Parsed {
  doc: Document;
  lines: LineCounter;
}

export function parse(text: string): Parsed {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines });
  return { doc, lines };
}

/** lineOf returns the 1-based line of the deepest node of field that exists in the document. */
export function lineOf(p: Parsed, field: string): number {
  let node: unknown = p.doc.contents;
  let line = 1;
  for (const seg of segments(field)) {
    if (isMap(node)) {
      const pair = node.items.find((it) => String((it.key as { value?: unknown })?.value ?? it.key) === String(seg));
      if (!pair) break;
      const keyNode = pair.key as { range?: [number, number, number] };
      if (keyNode?.range) line = p.lines.linePos(keyNode.range[0]).line;
      node = pair.value;
    } else if (isSeq(node) && typeof seg === "number") {
      const item = node.items[seg] as { range?: [number, number, number] } | undefined;
      if (!item) break;
      if (item.range) line = p.lines.linePos(item.range[0]).line;
      node = item;
    } else break;
  }
  return line;
}
