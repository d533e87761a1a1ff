export declare const LAYERS: ReadonlyArray<{ name: string; parts: readonly string[] }>;
export declare const DOMAIN: readonly string[];
export declare function checkLayers(root: string): string[];
export declare function layerTable(): string;
