/** The longest raw User-Agent shown when no browser in it is recognized. */
export const MAX_RAW_DEVICE = 80;

/**
 * Browsers by the product token naming them, most specific first: Edge, Opera and Samsung Internet
 * also say Chrome, Chrome also says Safari.
 */
const BROWSERS: Array<[RegExp, string]> = [
  [/\bEdg(?:e|A|iOS)?\//, 'Edge'],
  [/\bOPR\/|\bOpera\b/, 'Opera'],
  [/\bSamsungBrowser\//, 'Samsung Internet'],
  [/\bFirefox\/|\bFxiOS\//, 'Firefox'],
  [/\bHeadlessChrome\//, 'Headless Chrome'],
  [/\bChromium\//, 'Chromium'],
  [/\bChrome\/|\bCriOS\//, 'Chrome'],
  [/\bVersion\/[\d.]+.*\bSafari\/|\bSafari\//, 'Safari'],
  [/^curl\//, 'curl'],
  [/^Wget\//, 'Wget'],
];

/** Systems, most specific first: Android also says Linux, iOS also says Mac OS X. */
const SYSTEMS: Array<[RegExp, string]> = [
  [/\bAndroid\b/, 'Android'],
  [/\biPhone\b|\biPod\b/, 'iOS'],
  [/\biPad\b/, 'iPadOS'],
  [/\bCrOS\b/, 'ChromeOS'],
  [/\bWindows\b/, 'Windows'],
  [/\bMac OS X\b|\bMacintosh\b/, 'macOS'],
  [/\bFreeBSD\b/, 'FreeBSD'],
  [/\bLinux\b|\bX11\b/, 'Linux'],
];

/**
 * A short description of the device a User-Agent header names, for a person looking at their sessions:
 * "Chrome on Linux", "Firefox on Windows". A header of no browser known here is shown as it is, cut to
 * MAX_RAW_DEVICE characters; none at all is 'unknown'. Only a label: a client says what it likes here,
 * and the pages escape it like any value.
 */
export function deviceLabel(userAgent: string): string {
  const ua = userAgent.trim();
  if (ua === '') return 'unknown';
  const browser = BROWSERS.find(([pattern]) => pattern.test(ua))?.[1];
  if (browser === undefined) return ua.length > MAX_RAW_DEVICE ? `${ua.slice(0, MAX_RAW_DEVICE - 1)}…` : ua;
  const system = SYSTEMS.find(([pattern]) => pattern.test(ua))?.[1];
  return system === undefined ? browser : `${browser} on ${system}`;
}
