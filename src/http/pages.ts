import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LoginPageConfig } from '../config/types.js';

/** The built-in templates, beside this module (the build copies the folder into dist). */
const BUILT_IN = fileURLToPath(new URL('./pages/', import.meta.url));
/** The files of a template set; a templatesDir may replace any of them. */
const PAGE_FILES = ['layout.html', 'sign-in.html', 'sign-out.html', 'me.html', 'style.css'] as const;
export type PageFile = typeof PAGE_FILES[number];
export type PageName = Exclude<PageFile, 'layout.html' | 'style.css'> extends `${infer N}.html` ? N : never;

/** What a template reads: strings and numbers (escaped), booleans (sections), nested views and lists of them. */
export type View = { [key: string]: string | number | boolean | undefined | View | View[] };

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', '\'': '&#39;', '`': '&#96;', '=': '&#61;' };

function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`=]/g, (ch) => HTML_ESCAPES[ch]!);
}

/**
 * The sign-in pages, server-rendered from templates kept in one folder (src/http/pages/), with every
 * text a person reads in them: the code hands a template values, never markup. A small logic-less
 * language (a subset of Mustache): `{{name}}` inserts a value HTML-escaped, `{{#name}}…{{/name}}`
 * repeats for each item of a list or shows when the value is set, `{{^name}}…{{/name}}` shows when it
 * is not, and the layout's `{{{content}}}` is the page rendered inside it. An operator's templatesDir
 * replaces files one by one (a missing one is the built-in).
 */
export class Pages {
  private readonly files = new Map<PageFile, string>();

  constructor(readonly page: LoginPageConfig) {
    for (const file of PAGE_FILES) {
      const own = page.templatesDir === undefined ? undefined : join(page.templatesDir, file);
      this.files.set(file, readFileSync(own !== undefined && existsSync(own) ? own : join(BUILT_IN, file), 'utf8'));
    }
    // A template that cannot render (a section not closed, {{{…}}} other than content) fails the start
    // or the reload, not a person's sign-in.
    for (const name of ['sign-in', 'sign-out', 'me'] as const) this.render(name, {}, { stylesheet: '' });
  }

  /** The stylesheet, as served. */
  get stylesheet(): string {
    return this.files.get('style.css')!;
  }

  /** A whole page: `name`'s template inside the layout, with the title, the logo and the stylesheet's path. */
  render(name: PageName, view: View, common: { stylesheet: string }): string {
    const shared: View = { title: this.page.title, logoUrl: this.page.logoUrl, stylesheet: common.stylesheet };
    const content = renderTemplate(this.files.get(`${name}.html`)!, { ...shared, ...view });
    return renderTemplate(this.files.get('layout.html')!, { ...shared, ...view, [`page_${name.replace(/-/g, '_')}`]: true }, content);
  }

  /**
   * The Content-Security-Policy of every page: nothing but its own stylesheet and images (and the
   * logo's origin), forms posted only to the gateway (and the origins its redirects after a form lead
   * to: the provider's, `formTargets`), never framed. No script at all.
   */
  contentSecurityPolicy(formTargets: readonly string[]): string {
    const logo = this.page.logoUrl !== undefined && !this.page.logoUrl.startsWith('/') ? ` ${new URL(this.page.logoUrl).origin}` : '';
    const forms = formTargets.map((origin) => ` ${origin}`).join('');
    return `default-src 'none'; style-src 'self'; img-src 'self'${logo}; form-action 'self'${forms}; frame-ancestors 'none'; base-uri 'none'`;
  }
}

const TAG = /\{\{(\{?)\s*([#^/]?)\s*([A-Za-z_][\w.]*)\s*\}?\}\}/g;

/** Renders `template` with `view`; `{{{content}}}` takes `content` as it is (markup rendered by the gateway). */
export function renderTemplate(template: string, view: View, content = ''): string {
  return renderWith(template, [view], content);
}

function renderWith(template: string, stack: View[], content: string): string {
  let out = '';
  let at = 0;
  TAG.lastIndex = 0;
  for (let m = nextTag(template, at); m; m = nextTag(template, at)) {
    out += template.slice(at, m.index);
    at = m.index + m[0].length;
    const [, raw, kind, name] = m as unknown as [string, string, string, string];
    if (kind === '#' || kind === '^') {
      const end = closingTag(template, name, at);
      const inner = template.slice(at, end.start);
      at = end.after;
      const value = lookup(stack, name);
      if (kind === '^') {
        if (!truthy(value)) out += renderWith(inner, stack, content);
      } else if (Array.isArray(value)) {
        for (const item of value) out += renderWith(inner, [...stack, item], content);
      } else if (truthy(value)) {
        out += renderWith(inner, typeof value === 'object' ? [...stack, value] : stack, content);
      }
    } else if (kind === '/') {
      throw new Error(`template: {{/${name}}} closes nothing`);
    } else if (raw === '{') {
      if (name !== 'content') throw new Error(`template: {{{${name}}}} inserts unescaped markup; only {{{content}}} may`);
      out += content;
    } else {
      const value = lookup(stack, name);
      out += typeof value === 'string' || typeof value === 'number' ? escapeHtml(String(value)) : '';
    }
  }
  return out + template.slice(at);
}

function nextTag(template: string, from: number): RegExpExecArray | null {
  TAG.lastIndex = from;
  return TAG.exec(template);
}

/** The `{{/name}}` that closes the section opened just before `from`, sections of the same name nested inside skipped. */
function closingTag(template: string, name: string, from: number): { start: number; after: number } {
  let depth = 1;
  for (let m = nextTag(template, from); m; m = nextTag(template, m.index + m[0].length)) {
    if (m[3] !== name) continue;
    if (m[2] === '#' || m[2] === '^') depth++;
    else if (m[2] === '/' && --depth === 0) return { start: m.index, after: m.index + m[0].length };
  }
  throw new Error(`template: {{#${name}}} is not closed`);
}

/** A dotted name, looked up from the innermost context out. */
function lookup(stack: View[], name: string): View[string] {
  const [head, ...rest] = name.split('.');
  for (let i = stack.length - 1; i >= 0; i--) {
    const ctx = stack[i]!;
    if (!Object.hasOwn(ctx, head!)) continue;
    let value: View[string] = ctx[head!];
    for (const part of rest) {
      value = value !== undefined && typeof value === 'object' && !Array.isArray(value) && Object.hasOwn(value, part) ? value[part] : undefined;
    }
    return value;
  }
  return undefined;
}

function truthy(value: View[string]): boolean {
  if (Array.isArray(value)) return value.length > 0;
  return value !== undefined && value !== false && value !== '' && value !== 0;
}
