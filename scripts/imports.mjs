// What check-cycles.mjs and check-layers.mjs both read: the project's TypeScript files and the project
// files each imports or re-exports (relative specifiers, `.js` written for `.ts`; `import type` counts).
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import ts from 'typescript';

export function files(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return files(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/**
 * Every project file a file refers to, wherever in its syntax tree: `import` and `export … from`
 * (type-only too), `import x = require()`, dynamic `import()`, `require()`, and types written as
 * `import('…').T`. A reference hidden in an expression or a type position ties the design as much as a
 * top-level import does.
 */
export function importsOf(file) {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const out = [];
  const add = (spec) => {
    if (spec && ts.isStringLiteralLike(spec) && spec.text.startsWith('.')) out.push(resolve(dirname(file), spec.text.replace(/\.js$/, '.ts')));
  };
  const visit = (node) => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) add(node.moduleSpecifier);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) add(node.moduleReference.expression);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal);
    else if (ts.isCallExpression(node) && (node.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(node.expression) && node.expression.text === 'require'))) add(node.arguments[0]);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}
