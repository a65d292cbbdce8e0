/**
 * Named model sizes (issue 3: about 1M, 20M and 100M parameters with the byte tokenizer's
 * vocabulary of 257; a larger vocabulary adds vocabSize × dModel). `fon info` prints the exact count.
 */
import { ConfigError, DEFAULT_CONFIG, parseModelConfig, type ModelConfig } from './config.ts';

const PRESETS: Record<string, Partial<ModelConfig>> = {
  /** 0.89M parameters: trains on a 2-core CPU in minutes. */
  tiny: { dModel: 128, nLayers: 4, nHeads: 4, nKvHeads: 4, headDim: 32, mlpHidden: 384, contextLength: 256 },
  /** 19.4M parameters. */
  small: { dModel: 512, nLayers: 6, nHeads: 8, nKvHeads: 8, headDim: 64, mlpHidden: 1408, contextLength: 512 },
  /** 85.2M parameters. */
  base: { dModel: 768, nLayers: 12, nHeads: 12, nKvHeads: 12, headDim: 64, mlpHidden: 2048, contextLength: 1024 },
};

export const PRESET_NAMES = Object.keys(PRESETS);

export function preset(name: string): ModelConfig {
  const p = PRESETS[name];
  if (!p) throw new ConfigError(`unknown preset '${name}'; expected one of ${PRESET_NAMES.join(', ')}`);
  return parseModelConfig(p, DEFAULT_CONFIG, `preset '${name}'`);
}
