import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Pages, renderTemplate } from '../../src/http/pages.js';

const page = { title: 'Example <Corp>', logoUrl: undefined, templatesDir: undefined };

describe('the page templates', () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('escape every value, show sections for set values and once per item of a list', () => {
    expect(renderTemplate('<p title="{{a}}">{{a}}</p>', { a: '"><script>x</script>\'`=' })).toBe('<p title="&quot;&gt;&lt;script&gt;x&lt;/script&gt;&#39;&#96;&#61;">&quot;&gt;&lt;script&gt;x&lt;/script&gt;&#39;&#96;&#61;</p>');
    expect(renderTemplate('{{#f}}yes{{/f}}{{^f}}no{{/f}}', { f: false })).toBe('no');
    expect(renderTemplate('{{#l}}[{{n}}{{top}}]{{/l}}', { top: '!', l: [{ n: 1 }, { n: 2 }] })).toBe('[1!][2!]');
    expect(renderTemplate('{{#o}}{{o.x}}{{x}}{{/o}}', { o: { x: 'v' } })).toBe('vv');
    expect(() => renderTemplate('{{#a}}never closed', { a: true })).toThrow(/not closed/);
    expect(() => renderTemplate('{{{a}}}', { a: '<b>' })).toThrow(/only \{\{\{content\}\}\} may/);
  });

  it('render a page inside the layout with the title escaped, under a CSP without script', () => {
    const pages = new Pages(page);
    const html = pages.render('sign-out', { action: '/auth/logout', csrf: 't', user: 'bob' }, { stylesheet: '/auth/sign-in/style.css' });
    expect(html).toContain('<title>Sign out · Example &lt;Corp&gt;</title>');
    expect(html).toContain('You are signed in as <strong>bob</strong>.');
    expect(html).not.toMatch(/<script/i);
    expect(pages.contentSecurityPolicy([])).toBe('default-src \'none\'; style-src \'self\'; img-src \'self\'; form-action \'self\'; frame-ancestors \'none\'; base-uri \'none\'');
    const branded = new Pages({ ...page, logoUrl: 'https://static.example.com/logo.svg' });
    expect(branded.contentSecurityPolicy(['https://sso.example.com'])).toBe('default-src \'none\'; style-src \'self\'; img-src \'self\' https://static.example.com; form-action \'self\' https://sso.example.com; frame-ancestors \'none\'; base-uri \'none\'');
    expect(branded.render('sign-in', { returnTo: '/' }, { stylesheet: '/s.css' })).toContain('<img class="logo" src="https://static.example.com/logo.svg" alt="">');
  });

  it('take an operator\'s templatesDir file by file; a template that cannot render fails at start', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-pages-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'sign-out.html'), '<h1>Abmelden</h1><form method="post" action="{{action}}"><input type="hidden" name="csrf" value="{{csrf}}"><button>Abmelden</button></form>');
    writeFileSync(join(dir, 'style.css'), 'body { color: black; }');
    const pages = new Pages({ ...page, templatesDir: dir });
    expect(pages.render('sign-out', { action: '/out', csrf: 't' }, { stylesheet: '/s.css' })).toContain('<h1>Abmelden</h1>');
    expect(pages.stylesheet).toBe('body { color: black; }');
    // The files it lacks are the built-in ones.
    expect(pages.render('sign-in', { returnTo: '/' }, { stylesheet: '/s.css' })).toContain('<h1>Sign in</h1>');
    writeFileSync(join(dir, 'me.html'), '{{#sessions}}unclosed');
    expect(() => new Pages({ ...page, templatesDir: dir })).toThrow(/not closed/);
  });
});
