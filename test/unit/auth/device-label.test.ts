import { describe, expect, it } from 'vitest';
import { deviceLabel, MAX_RAW_DEVICE } from '../../../src/auth/device-label.js';

describe('deviceLabel', () => {
  it.each([
    ['Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36', 'Chrome on Linux'],
    ['Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.6778.33 Safari/537.36', 'Headless Chrome on Linux'],
    ['Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0', 'Edge on Windows'],
    ['Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0', 'Firefox on Windows'],
    ['Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15', 'Safari on macOS'],
    ['Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1', 'Safari on iOS'],
    ['Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36', 'Chrome on Android'],
    ['Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 OPR/115.0.0.0', 'Opera on Linux'],
    ['curl/8.5.0', 'curl'],
  ])('names %s as %s', (ua, label) => {
    expect(deviceLabel(ua)).toBe(label);
  });

  it('shows a header of no known browser as it is, cut short; none at all is unknown', () => {
    expect(deviceLabel('my-sync-tool 2.1')).toBe('my-sync-tool 2.1');
    const long = deviceLabel(`agent ${'x'.repeat(200)}`);
    expect(long).toHaveLength(MAX_RAW_DEVICE);
    expect(long.endsWith('…')).toBe(true);
    expect(deviceLabel('')).toBe('unknown');
    expect(deviceLabel('   ')).toBe('unknown');
  });
});
